#include "refit/executors/delta_executor.h"
#include "refit/core/elapsed.h"

#include <chrono>
#include <cstring>
#include <map>
#include <optional>
#include <tuple>

#include <fmt/format.h>

#include "delta_pieces.h"
#include "delta_prepared.h"
#include "delta_rebalance.h"
#include "refit/core/try.h"
#include "refit/executors/agreement.h"
#include "refit/executors/delta_memory.h"
#include "refit/executors/delta_step.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/sender_quantization.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

using delta_pieces::Piece;
using delta_prepared::capacity;
using delta_prepared::DeltaPrepared;
using delta_prepared::make_prepared;
using delta_prepared::Sending;
using delta_prepared::Source;

// A payload size agreed in step 3 carries in its top bit whether the piece went dense for want of
// an agreed baseline, which re-balancing leaves out of its measure of the tensor's delta.
constexpr std::uint64_t kSentDense = std::uint64_t{1} << 63;

Result<void> pack(DeltaPrepared& p, const Piece& piece, const DeltaBuffer& packed) {
  return p.memory->pack(p.buffers.memory, piece.shard, piece.box, piece.dtype, packed.bytes());
}

// (piece, value) pairs as bytes, for the allgathers of a step.
std::string encode_pairs(const std::vector<std::pair<std::int32_t, std::uint64_t>>& pairs) {
  std::string out(pairs.size() * 16, '\0');
  for (std::size_t i = 0; i < pairs.size(); ++i) {
    const auto piece = static_cast<std::uint64_t>(pairs[i].first);
    std::memcpy(out.data() + i * 16, &piece, 8);
    std::memcpy(out.data() + i * 16 + 8, &pairs[i].second, 8);
  }
  return out;
}

// Every rank's pairs as one value per piece of the plan (nullopt where nobody gave one).
[[nodiscard]] Result<std::vector<std::optional<std::uint64_t>>> decode_pairs(
    const std::vector<std::string>& contributions, std::int32_t total, std::string_view what) {
  std::vector<std::optional<std::uint64_t>> out(static_cast<std::size_t>(total));
  for (std::size_t r = 0; r < contributions.size(); ++r) {
    const auto& c = contributions[r];
    if (c.size() % 16 != 0)
      return fail(ErrorCode::kRuntime, fmt::format("rank {} sent malformed {}", r, what));
    for (std::size_t i = 0; i < c.size(); i += 16) {
      std::uint64_t piece = 0;
      std::uint64_t value = 0;
      std::memcpy(&piece, c.data() + i, 8);
      std::memcpy(&value, c.data() + i + 8, 8);
      if (piece >= static_cast<std::uint64_t>(total))
        return fail(ErrorCode::kRuntime,
                    fmt::format("rank {} sent {} of piece {} of {}", r, what, piece, total));
      out[piece] = value;
    }
  }
  return out;
}

[[nodiscard]] Result<std::vector<std::optional<std::uint64_t>>> allgather_pairs(
    Bootstrap& bootstrap, const std::vector<std::pair<std::int32_t, std::uint64_t>>& mine, std::int32_t total,
    std::string_view what) {
  return decode_pairs(REFIT_TRY_IN(bootstrap.allgather(encode_pairs(mine)), std::string(what)), total, what);
}

std::byte* payload_memory(DeltaPrepared& p, std::int32_t transfer) {
  for (auto& pl : p.payloads)
    if (pl.transfer == transfer) return pl.memory->bytes().data();
  return nullptr;
}

// This rank's checksums of what it holds of the round's pieces.
[[nodiscard]] Result<std::vector<std::pair<std::int32_t, std::uint64_t>>> held_checksums(DeltaPrepared& p,
                                                                                         std::int32_t round) {
  std::vector<std::pair<std::int32_t, std::uint64_t>> mine;
  for (auto& r : p.receives) {
    if (r.piece.round != round) continue;
    REFIT_TRY(pack(p, r.piece, *r.packed));
    r.audit = REFIT_TRY(p.memory->checksum(r.packed->bytes()));
    mine.emplace_back(r.piece.index, r.audit.value);
  }
  return mine;
}

// Step 1: every receiver's checksum of what it holds, by piece. A rank that could not take its
// own still takes part, and fails after, so that the step fails on every rank at its sizes.
[[nodiscard]] Result<std::vector<std::optional<std::uint64_t>>> audit(DeltaPrepared& p, Bootstrap& bootstrap,
                                                                      std::int32_t round) {
  const auto mine = held_checksums(p, round);
  const std::vector<std::pair<std::int32_t, std::uint64_t>> none;
  auto all = allgather_pairs(bootstrap, mine ? *mine : none, p.total_pieces, "baseline checksums");
  if (!mine) return std::unexpected(mine.error());
  return all;
}

// Writes the payload of `s` into `out` (encoding it, or copying the box's encoding of this step
// that another receiver got) and returns it.
[[nodiscard]] Result<std::span<const std::byte>> payload_of(DeltaPrepared& p, const Sending& s, bool agreed,
                                                            std::span<std::byte> out) {
  Source& src = p.sources[s.source];
  auto& done = agreed ? src.delta : src.dense;
  if (!done.empty()) {
    REFIT_TRY(p.memory->copy(out, done));
    return out.first(done.size());
  }
  const auto header = REFIT_TRY(p.memory->encode(DeltaSource{.baseline = src.baseline->bytes(),
                                                             .current = src.current->bytes(),
                                                             .dtype = s.piece.dtype,
                                                             .base = agreed ? src.base : std::nullopt,
                                                             .name = s.piece.name},
                                                 out));
  src.result = header.result;
  if (agreed) src.changed = header.changed_elements;
  done = out.first(static_cast<std::size_t>(header.payload_bytes()));
  return done;
}

// Before round 0: every weight box the rank sends fp8 of, quantized from its bf16 as the dense
// refit's quantizing executor does.
void quantize_at_senders(DeltaPrepared& p, ExecutionReport& total) {
  if (p.fp8.empty()) return;
  const auto start = SteadyClock::now();
  for (const auto& q : p.fp8)
    if (q.box.sent)
      quantize_box(p.buffers, q.box,
                   QuantizedMemory{.values = q.values->bytes(), .scales = q.scales->bytes()});
  total.work.quantize = seconds_since(start);
}

// A landing rank's quantize steps of `round`: the landing copies the earlier rounds decoded,
// quantized into the rank's fp8 values and scales, which later rounds forward.
void quantize_landing(DeltaPrepared& p, std::int32_t round, ExecutionReport& total) {
  const auto start = SteadyClock::now();
  bool ran = false;
  for (const auto& q : p.landing) {
    if (q.round != round) continue;
    const auto& box = q.values.box;
    quantize(q.scheme,
             Bf16View{.data = reinterpret_cast<const std::uint16_t*>(q.copy.bytes.data()),
                      .shape = box.extent,
                      .strides = row_major_strides(box.extent)},
             std::span(reinterpret_cast<std::uint8_t*>(q.values.bytes.data()), q.values.bytes.size()),
             q.scales.bytes);
    ran = true;
  }
  if (ran) total.work.quantize = total.work.quantize.value_or(Seconds{0}) + seconds_since(start);
}

// Step 2: every piece this rank sends, encoded against the baseline its receiver holds: each box
// packed once, and encoded at most once against its baseline and once densely, whatever the
// number of receivers.
[[nodiscard]] Result<void> encode(DeltaPrepared& p,
                                  const std::vector<std::optional<std::uint64_t>>& receivers,
                                  std::int32_t round, DeltaStepReport& report) {
  for (auto& src : p.sources)
    if (src.round == round) src.delta = src.dense = {}, src.sent = false;
  for (const auto& s : p.sends) {
    auto& src = p.sources[s.source];
    if (s.piece.round != round || src.packed) continue;
    REFIT_TRY(pack(p, s.piece, *src.current));
    src.packed = true;
  }
  std::int64_t at = 0;
  std::int32_t transfer = -1;
  for (auto& s : p.sends) {
    if (s.piece.round != round) continue;
    if (s.piece.transfer != transfer) at = 0, transfer = s.piece.transfer;
    auto& src = p.sources[s.source];
    const auto& held = receivers[static_cast<std::size_t>(s.piece.index)];
    // A box this rank has no baseline of (its first step, a failed one, a box new to it after a
    // re-plan) whose receiver holds exactly this step's bytes needs none sent: they become it.
    if (!src.base && held) {
      const auto current = REFIT_TRY(p.memory->checksum(src.current->bytes()));
      if (current.value == *held) {
        REFIT_TRY(p.memory->copy(src.baseline->bytes(), src.current->bytes()));
        src.base = current;
      }
    }
    const bool agreed = src.base && held && src.base->value == *held;
    const auto out =
        std::span(payload_memory(p, transfer) + at, static_cast<std::size_t>(capacity(p, s.piece)));
    const auto payload = REFIT_TRY(payload_of(p, s, agreed, out));
    s.payload = agreed && src.changed == 0 ? 0 : static_cast<std::int64_t>(payload.size());
    s.dense = !agreed;
    src.sent = src.sent || s.payload > 0;
    at += s.payload;
    report.dense_bytes += Bytes{s.piece.bytes};
    report.unchanged += s.payload == 0 ? 1 : 0;
    report.full += agreed ? 0 : 1;
    ++report.pieces;
  }
  return {};
}

// What the executor behind moves this step, and this rank's buffers of it.
struct StepPlan {
  DeltaStep step;
  RankBuffers buffers;
};

[[nodiscard]] Result<StepPlan> step_plan(DeltaPrepared& p, const std::vector<std::int64_t>& sizes) {
  StepPlan out{.step = REFIT_TRY(delta_step(p.plan, sizes)), .buffers = {}};
  out.buffers = delta_step_buffers(out.step, p.rank, p.memory->kind(),
                                   [&p](std::int32_t transfer) { return payload_memory(p, transfer); });
  return out;
}

// Step 3's sizes: every piece's payload bytes, agreed by every rank (a rank that failed to encode
// makes every rank fail the step).
[[nodiscard]] Result<std::vector<std::int64_t>> agree_sizes(DeltaPrepared& p, Bootstrap& bootstrap,
                                                            std::int32_t round, const Result<void>& encoded) {
  std::vector<std::pair<std::int32_t, std::uint64_t>> mine;
  for (const auto& s : p.sends)
    if (s.piece.round == round)
      mine.emplace_back(s.piece.index, static_cast<std::uint64_t>(s.payload) | (s.dense ? kSentDense : 0));
  // A quantize step moves nothing, and says nothing about its tensor's delta.
  for (const auto piece : p.quantized)
    if (p.rounds_of[static_cast<std::size_t>(piece)] == round) mine.emplace_back(piece, kSentDense);
  const auto all = REFIT_TRY_IN(
      agree(bootstrap, encoded ? Result<std::string>(encode_pairs(mine)) : std::unexpected(encoded.error())),
      "payload sizes");
  const auto given = REFIT_TRY(decode_pairs(all, p.total_pieces, "payload sizes"));
  // A piece that relays forward as it arrived is sized by its sender, as the piece it carries.
  std::vector<std::int64_t> sizes;
  for (std::size_t i = 0; i < given.size(); ++i) {
    const auto origin = static_cast<std::size_t>(p.schedule.origin[i]);
    if (!given[origin] && p.rounds_of[i] == round)
      return fail(ErrorCode::kRuntime, fmt::format("no rank sized piece {}", origin));
    const auto value = given[origin].value_or(0);
    sizes.push_back(static_cast<std::int64_t>(value & ~kSentDense));
    if (p.rounds_of[i] != round) continue;
    p.step_payloads[i] = sizes.back();
    p.step_dense[i] = (value & kSentDense) != 0;
  }
  for (auto& r : p.receives)
    if (r.piece.round == round) r.payload = sizes[static_cast<std::size_t>(r.piece.index)];
  return sizes;
}

// Step 4: every piece this rank received, decoded into its packed copy and then unpacked, piece by
// piece all or nothing; the first refusal is the error, after the others have landed.
[[nodiscard]] Result<void> decode(DeltaPrepared& p, std::int32_t round) {
  std::optional<Error> refused;
  std::int64_t at = 0;
  std::int32_t transfer = -1;
  for (auto& r : p.receives) {
    if (r.piece.round != round) continue;
    if (r.piece.transfer != transfer) at = 0, transfer = r.piece.transfer;
    if (r.payload == 0) continue;
    const auto payload =
        std::span<const std::byte>(payload_memory(p, transfer) + at, static_cast<std::size_t>(r.payload));
    at += r.payload;
    auto applied = p.memory->decode(
        payload,
        DeltaTarget{
            .bytes = r.packed->bytes(), .dtype = r.piece.dtype, .base = r.audit, .name = r.piece.name});
    if (applied)
      applied =
          p.memory->unpack(p.buffers.memory, r.piece.shard, r.piece.box, r.piece.dtype, r.packed->bytes());
    if (!applied && !refused) refused = applied.error();
  }
  if (refused) return std::unexpected(*refused);
  return {};
}

// After a round: a sender keeps what it sent as its baseline when the transfers succeeded, and
// forgets the baselines of the round's pieces when they did not.
void settle(DeltaPrepared& p, std::int32_t round, bool moved) {
  for (auto& src : p.sources) {
    if (src.round != round) continue;
    if (src.sent && moved) {
      std::swap(src.baseline, src.current);
      src.base = src.result;
    } else if (src.sent) {
      src.base.reset();
    }
    src.packed = false;
  }
}

void add(ExecutionReport& total, const ExecutionReport& round) {
  total.bytes_sent += round.bytes_sent;
  total.bytes_received += round.bytes_received;
  total.elapsed += round.elapsed;
  total.messages += round.messages;
  total.stored_directly += round.stored_directly;
}

// Every rank's outcome of a hop's transfers: they may fail on some ranks only (a receiver's), and
// a rank that left the step alone would leave the others waiting for it in the next hop or audit.
// One small exchange a hop.
[[nodiscard]] Result<void> agree_moved(Bootstrap& bootstrap, Rank rank, std::int32_t round, std::int32_t hop,
                                       const Result<ExecutionReport>& moved) {
  const auto mine =
      moved
          ? Result<std::string>()
          : Result<std::string>(std::unexpected(Error(moved.error()).in(fmt::format("rank {}", rank.value))));
  REFIT_TRY_IN(agree(bootstrap, mine), fmt::format("round {}, hop {} of the step's transfers", round, hop));
  return {};
}

// The audits the round's senders encode against. A payload that relays forward as it arrived
// applies at every receiver down the chain, so its sender encodes it against the receivers'
// baseline only where all of them hold the same bytes; otherwise it goes dense, which needs none.
std::vector<std::optional<std::uint64_t>> chain_audits(std::vector<std::optional<std::uint64_t>> held,
                                                       const DeltaSchedule& schedule) {
  for (std::size_t i = 0; i < held.size(); ++i) {
    const auto origin = static_cast<std::size_t>(schedule.origin[i]);
    if (origin != i && held[i] != held[origin]) held[origin].reset();
  }
  return held;
}

// Where each piece's payload lies in its transfer's payloads (they lie back to back), by piece.
std::vector<std::int64_t> payload_offsets(const Plan& plan, const std::vector<std::int64_t>& sizes) {
  std::vector<std::int64_t> out(sizes.size(), 0);
  std::size_t piece = 0;
  for (const auto& t : plan.transfers) {
    std::int64_t at = 0;
    for (std::size_t s = 0; s < t.segments.size(); ++s, ++piece) {
      out[piece] = at;
      at += sizes[piece];
    }
  }
  return out;
}

// Before a hop: each piece this rank forwards in it, its payload copied from where it arrived to
// where its transfer's payloads leave, byte for byte (`offsets`: payload_offsets of the round).
[[nodiscard]] Result<void> forward(DeltaPrepared& p, std::int32_t round, std::int32_t hop,
                                   const std::vector<std::int64_t>& sizes,
                                   const std::vector<std::int64_t>& offsets, DeltaStepReport& report) {
  for (const auto& f : p.forwards) {
    if (f.round != round || f.hop != hop) continue;
    const auto bytes = static_cast<std::size_t>(sizes[static_cast<std::size_t>(f.index)]);
    report.dense_bytes += Bytes{f.bytes};
    report.unchanged += bytes == 0 ? 1 : 0;
    report.full += p.step_dense[static_cast<std::size_t>(f.index)] ? 1 : 0;
    ++report.pieces;
    if (bytes == 0) continue;
    const auto* from = payload_memory(p, f.via) + offsets[static_cast<std::size_t>(f.forwards)];
    auto* to = payload_memory(p, f.transfer) + offsets[static_cast<std::size_t>(f.index)];
    REFIT_TRY(p.memory->copy(std::span(to, bytes), std::span(from, bytes)));
  }
  return {};
}

// One hop of a round: the payloads it forwards put in place, and the executor behind moving the
// hop's payloads, failed on every rank or none.
[[nodiscard]] Result<ExecutionReport> move_hop(DeltaPrepared& p, Executor& inner, Bootstrap& bootstrap,
                                               std::int32_t round, std::int32_t hop,
                                               const std::vector<std::int64_t>& sizes,
                                               const std::vector<std::int64_t>& offsets,
                                               DeltaStepReport& report) {
  auto start = SteadyClock::now();
  const auto forwarded = forward(p, round, hop, sizes, offsets, report);
  const auto step = REFIT_TRY(step_plan(p, hop_payloads(p.plan, p.schedule, sizes, round, hop)));
  auto prepared = forwarded ? inner.prepare(step.step.plan, p.rank, step.buffers)
                            : Result<std::unique_ptr<PreparedPlan>>(std::unexpected(forwarded.error()));
  report.exchange += seconds_since(start);
  auto moved = prepared ? inner.execute(**prepared)
                        : Result<ExecutionReport>(std::unexpected(
                              std::move(prepared.error()).in("preparing the step's payloads")));
  start = SteadyClock::now();
  const auto agreed = agree_moved(bootstrap, p.rank, round, hop, moved);
  report.exchange += seconds_since(start);
  REFIT_TRY(agreed);
  return moved;
}

// One round of a step up to the transfers: the receivers' audit, the senders' encoding, the
// agreed sizes, and the round's hops one after another.
[[nodiscard]] Result<ExecutionReport> move_round(DeltaPrepared& p, Executor& inner, Bootstrap& bootstrap,
                                                 std::int32_t round, DeltaStepReport& report) {
  auto start = SteadyClock::now();
  const auto held = audit(p, bootstrap, round);
  report.exchange += seconds_since(start);
  start = SteadyClock::now();
  const auto encoded = held ? encode(p, chain_audits(*held, p.schedule), round, report)
                            : Result<void>(std::unexpected(held.error()));
  report.encode += seconds_since(start);
  start = SteadyClock::now();
  const auto sizes = REFIT_TRY(agree_sizes(p, bootstrap, round, encoded));
  report.exchange += seconds_since(start);
  const auto offsets = payload_offsets(p.plan, sizes);
  ExecutionReport moved;
  for (std::int32_t hop = 0; hop < p.schedule.hops[static_cast<std::size_t>(round)]; ++hop)
    add(moved, REFIT_TRY(move_hop(p, inner, bootstrap, round, hop, sizes, offsets, report)));
  return moved;
}

// Every rank numbers the pieces alike only when they prepare the same plan; a rank that could not
// plan or prepare (`ready`) makes every rank fail.
[[nodiscard]] Result<void> agree_on_plan(Bootstrap& bootstrap, const Plan& plan, const Result<void>& ready) {
  const auto mine =
      ready ? Result<std::string>(encode_settings({{.name = "plan hash", .value = plan_hash_hex(plan)}}))
            : Result<std::string>(std::unexpected(ready.error()));
  return check_same_settings(REFIT_TRY(agree(bootstrap, mine)));
}

template <class T>
Result<void> ready(const Result<T>& made) {
  if (made) return {};
  return std::unexpected(made.error());
}

// Moves the baselines of `old` to `fresh` where the rank sends the same box of the same tensor in
// the same round: the receivers' audit checks them as before.
void keep_baselines(DeltaPrepared& old, DeltaPrepared& fresh) {
  std::map<std::tuple<std::int32_t, std::uint32_t, Box>, std::size_t> held;
  for (const auto& s : old.sends) held.try_emplace({s.piece.round, s.piece.tensor, s.piece.box}, s.source);
  for (const auto& s : fresh.sends) {
    const auto it = held.find({s.piece.round, s.piece.tensor, s.piece.box});
    if (it == held.end()) continue;
    auto& from = old.sources[it->second];
    auto& to = fresh.sources[s.source];
    if (!from.base || to.base) continue;
    to.baseline = std::move(from.baseline);
    to.base = from.base;
    from.base.reset();
  }
}

// Whether `fresh` is worth re-preparing for: another plan whose busiest sender, weighed by the
// step's payloads, carries at least `min_gain` less than the old plan's. The payloads may weigh the
// plan's choices alike (the same plan), or move boxes for too little.
bool worth_preparing(const Plan& old, const Plan& fresh, std::span<const Bytes> moved, double min_gain) {
  if (fresh == old) return false;
  const auto before = static_cast<double>(delta_rebalance::busiest_sender(old, moved).value);
  return static_cast<double>(delta_rebalance::busiest_sender(fresh, moved).value) < (1 - min_gain) * before;
}

// After a step whose transfers all moved: the step's payloads per tensor against those the plan
// was balanced by, the same on every rank; past the threshold every rank re-plans, and re-prepares
// where the new plan gains enough.
[[nodiscard]] Result<void> rebalance(DeltaPrepared& p, Bootstrap& bootstrap, DeltaStepReport& report) {
  if (!p.rebalance) return {};
  const auto& r = *p.rebalance;
  const auto start = SteadyClock::now();
  auto measured = delta_rebalance::measured_moved_bytes(p.plan, p.step_payloads, p.step_dense, p.planned);
  report.share_drift = delta_rebalance::share_drift(p.planned, measured);
  if (!(*report.share_drift > r.max_drift)) return {};
  const auto plan = r.replan(measured);
  const bool keep = plan && !worth_preparing(p.plan, *plan, measured, r.min_gain);
  auto made = !plan  ? Result<std::unique_ptr<DeltaPrepared>>(std::unexpected(plan.error()))
              : keep ? Result<std::unique_ptr<DeltaPrepared>>(nullptr)
                     : make_prepared(*plan, p.rank, p.buffers, *p.memory);
  REFIT_TRY_IN(agree_on_plan(bootstrap, plan ? *plan : p.plan, ready(made)),
               "re-balancing by the step's payloads");
  report.rebalance = seconds_since(start);
  if (keep) {
    p.planned = std::move(measured);
    return {};
  }
  keep_baselines(p, **made);
  (*made)->planned = std::move(measured);
  (*made)->rebalance = p.rebalance;
  p = std::move(**made);
  report.rebalanced = true;
  return {};
}

}  // namespace

ExecutorCapabilities DeltaExecutor::capabilities() const {
  return ExecutorCapabilities{.host_memory = inner_->capabilities().host_memory,
                              .cuda_memory = memory_->kind() == MemoryKind::kCuda,
                              .quantizes_at_senders = false};
}

DeltaExecutor::DeltaExecutor(std::unique_ptr<Executor> inner, Bootstrap& bootstrap,
                             DeltaEncodeOptions options, std::optional<DeltaRebalance> rebalance)
    : inner_(std::move(inner)), bootstrap_(&bootstrap), rebalance_(std::move(rebalance)) {
  memory_ = host_delta_memory([&e = *inner_](Bytes b) { return e.allocate_host(b); }, options);
}

DeltaExecutor::DeltaExecutor(std::unique_ptr<Executor> inner, Bootstrap& bootstrap,
                             std::unique_ptr<DeltaMemory> memory, std::optional<DeltaRebalance> rebalance)
    : inner_(std::move(inner)),
      bootstrap_(&bootstrap),
      memory_(std::move(memory)),
      rebalance_(std::move(rebalance)) {}

Result<std::unique_ptr<PreparedPlan>> DeltaExecutor::prepare(const Plan& plan, Rank rank,
                                                             const RankBuffers& buffers) {
  auto made = make_prepared(plan, rank, buffers, *memory_);
  REFIT_TRY(agree_on_plan(*bootstrap_, plan, ready(made)));
  (*made)->rebalance = rebalance_;
  return std::unique_ptr<PreparedPlan>(std::move(*made));
}

// Round by round (delta_schedule.h: a relay encodes again in round k + 1 what it decoded in round k,
// unless it forwards it as it arrived, in a later hop of round k). A piece this rank
// could not apply fails the step here once every round is over and the ranks have re-balanced, so
// that the other ranks are not left waiting; a round whose transfers failed on any rank ends the
// step on every rank, before any of them decodes it.
Result<ExecutionReport> DeltaExecutor::execute(PreparedPlan& prepared) {
  auto* p = dynamic_cast<DeltaPrepared*>(&prepared);
  if (p == nullptr) return invalid("execute: the plan was prepared by another executor");
  DeltaStepReport report;
  ExecutionReport total;
  std::optional<Error> refused;
  quantize_at_senders(*p, total);
  for (std::int32_t round = 0; round < p->schedule.rounds(); ++round) {
    quantize_landing(*p, round, total);
    const auto moved = move_round(*p, *inner_, *bootstrap_, round, report);
    settle(*p, round, moved.has_value());
    if (!moved) return std::unexpected(moved.error());
    add(total, *moved);
    const auto start = SteadyClock::now();
    if (auto applied = decode(*p, round); !applied && !refused) refused = applied.error();
    report.decode += seconds_since(start);
  }
  REFIT_TRY(rebalance(*p, *bootstrap_, report));
  if (refused) return std::unexpected(*refused);
  total.delta = report;
  return total;
}

}  // namespace refit
