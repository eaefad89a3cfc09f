// Preparing a plan for delta steps: a rank's pieces, baselines and payload memory (delta_prepared.h).
#include "delta_prepared.h"

#include <map>
#include <tuple>

#include <fmt/format.h>

#include "delta_rebalance.h"
#include "refit/core/try.h"
#include "refit/quantize/quantize.h"

namespace refit::delta_prepared {
namespace {

[[nodiscard]] Result<void> allocate_payloads(DeltaPrepared& p) {
  std::vector<Bytes> sizes;
  std::vector<std::int32_t> transfers;
  const auto add = [&](const Piece& piece) {
    if (transfers.empty() || transfers.back() != piece.transfer) {
      transfers.push_back(piece.transfer);
      sizes.push_back(Bytes{0});
    }
    sizes.back() += Bytes{capacity(p, piece)};
  };
  for (const auto& s : p.sends) add(s.piece);
  for (const auto& f : p.forwards) add(f);
  for (const auto& r : p.receives) add(r.piece);
  auto memory = REFIT_TRY(p.memory->allocate_payloads(
      sizes, fmt::format("allocating the delta payloads of rank {}", p.rank.value)));
  for (std::size_t i = 0; i < memory.size(); ++i)
    p.payloads.push_back(Payloads{.transfer = transfers[i], .memory = std::move(memory[i])});
  return {};
}

// The buffers the rank's pieces are packed from: `given`, with each weight box it quantizes
// replaced by its fp8 values and scales in memory of its own (sender_quantization.h). Device
// memory is refused with the pieces (delta_pieces.h), before anything is quantized.
[[nodiscard]] Result<RankBuffers> quantized_sources(const Plan& plan, Rank rank, const RankBuffers& given,
                                                    std::vector<Quantized>& fp8) {
  const auto found = REFIT_TRY(sender_quantizations(plan, rank, given));
  if (found.empty()) return given;
  std::vector<QuantizedMemory> memory;
  for (const auto& q : found) {
    auto& made = fp8.emplace_back(Quantized{
        .box = q, .values = heap_allocation(q.values_bytes()), .scales = heap_allocation(q.scales_bytes())});
    memory.push_back(QuantizedMemory{.values = made.values->bytes(), .scales = made.scales->bytes()});
  }
  return sending_buffers(given, found, memory).buffers;
}

// Quantizing (at the senders, at the landing ranks) runs the CPU quantizer on the shards.
[[nodiscard]] Result<void> check_quantized_on_host(const Plan& plan, Rank rank, const RankBuffers& buffers) {
  if (buffers.memory == MemoryKind::kHost) return {};
  for (const auto& t : plan.tensors)
    if (t.quantization && t.quantization->site != QuantSite::kReceiver)
      return unsupported(
          fmt::format("rank {}: tensor '{}': a delta refit quantizes on the host, so FP8 in "
                      "flight with deltas takes host memory",
                      rank.value, t.name));
  return {};
}

// Every box it sends gets its baseline and this step's bytes, every piece it receives its copy.
[[nodiscard]] Result<void> allocate_packed(DeltaPrepared& p) {
  for (auto& s : p.sources) {
    const auto bytes = Bytes{p.sends[s.first_send].piece.bytes};
    s.baseline = REFIT_TRY(p.memory->allocate(bytes));
    s.current = REFIT_TRY(p.memory->allocate(bytes));
  }
  for (auto& r : p.receives) r.packed = REFIT_TRY(p.memory->allocate(Bytes{r.piece.bytes}));
  return {};
}

}  // namespace

Result<std::unique_ptr<DeltaPrepared>> make_prepared(const Plan& plan, Rank rank, const RankBuffers& buffers,
                                                     DeltaMemory& memory) {
  REFIT_TRY(validate_structure(plan));
  REFIT_TRY(memory.check_shards(buffers, rank));
  REFIT_TRY(check_quantized_on_host(plan, rank, buffers));
  std::vector<Quantized> fp8;
  const auto packed_from = REFIT_TRY(quantized_sources(plan, rank, buffers, fp8));
  auto pieces = REFIT_TRY(delta_pieces::rank_pieces(plan, rank, packed_from));
  auto p = std::make_unique<DeltaPrepared>();
  p->fp8 = std::move(fp8);
  p->quantized = std::move(pieces.quantized);
  p->landing = std::move(pieces.landing);
  p->plan = plan;
  p->rank = rank;
  p->total_pieces = pieces.total;
  p->rounds_of = std::move(pieces.rounds_of);
  p->schedule = std::move(pieces.schedule);
  p->forwards = std::move(pieces.forwards);
  p->memory = &memory;
  p->buffers = buffers;
  p->planned = delta_rebalance::dense_bytes(plan);
  p->step_payloads.assign(static_cast<std::size_t>(pieces.total), 0);
  p->step_dense.assign(static_cast<std::size_t>(pieces.total), true);
  std::map<std::tuple<std::int32_t, std::uint32_t, Box>, std::size_t> sources;  // by round, tensor, box
  for (auto& piece : pieces.sends) {
    const auto [it, added] = sources.try_emplace({piece.round, piece.tensor, piece.box}, p->sources.size());
    if (added) p->sources.push_back(Source{.round = piece.round, .first_send = p->sends.size()});
    p->sends.push_back(Sending{.piece = std::move(piece), .source = it->second});
  }
  for (auto& piece : pieces.receives) p->receives.push_back(Receiving{.piece = std::move(piece)});
  REFIT_TRY(allocate_packed(*p));
  REFIT_TRY(allocate_payloads(*p));
  return p;
}

}  // namespace refit::delta_prepared
