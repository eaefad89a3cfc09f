#include "delta_prediction.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/delta/codec_speed.h"
#include "refit/delta/payload_estimate.h"
#include "refit/executors/delta_schedule.h"
#include "refit/executors/delta_step.h"

namespace refit {
namespace {

// The delta executor's relays forward from their own destination shards, where they decoded what
// they received the round before, not from a relay's scratch (executors' delta_pieces.h).
[[nodiscard]] Result<void> check_relays(const Plan& plan, const ReshardProblem& problem) {
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments) {
      if (s.via == kFromSourceShard) continue;
      const Layout& landed = problem.tensors()[s.tensor].destination;
      const auto position = landed.mesh().position_of_rank(t.sender);
      if (!position || !landed.box_at_position(*position).contains(s.box))
        return unsupported(fmt::format(
            "transfer {} forwards tensor '{}' box {} from outside rank {}'s own destination shard (a "
            "relay's scratch), which a delta refit does not take",
            t.id, plan.tensors[s.tensor].name, s.box.to_string(), t.sender.value));
    }
  return {};
}

// The schemes of the plan's quantized weights, for the estimate to sample.
std::vector<QuantScheme> schemes_of(const Plan& plan) {
  std::vector<QuantScheme> out;
  for (const auto& t : plan.tensors)
    if (t.quantization && std::ranges::find(out, t.quantization->scheme) == out.end())
      out.push_back(t.quantization->scheme);
  return out;
}

// One round of the step (delta_schedule.h): each piece's expected payload (0 for the pieces of
// other rounds, as the executor agrees them round by round, and for a landing rank's quantize
// step, which moves nothing), and per rank the CPU time it spends before the round's transfers
// (quantizing, with FP8 in flight, and encoding each box it encodes in the round once, whatever the
// number of its receivers, as the executor does; a relay that forwards a payload as it arrived
// encodes nothing) and after them (auditing and decoding what it receives).
struct RoundPayloads {
  std::vector<std::int64_t> pieces;
  std::vector<Seconds> encode;  // by rank
  std::vector<Seconds> decode;  // by rank
};

// The bf16 a sender quantizes for `s` before it encodes: a box of a weight quantized at the
// senders, sent from the sender's own shard (relays forward fp8).
Bytes quantized_at_sender(const Plan& plan, const Segment& s) {
  const auto& q = plan.tensors[s.tensor].quantization;
  const bool quantizes = q && q->site == QuantSite::kSender && !q->is_scales() && s.via == kFromSourceShard;
  return Bytes{quantizes ? s.box.volume() * dtype_size(q->from) : 0};
}

// A landing rank's quantize step: the bf16 of the values it makes, at the start of its round.
Seconds quantize_step_time(const Plan& plan, const Transfer& t) {
  Bytes bf16;
  for (const auto& s : t.segments) {
    const auto& q = plan.tensors[s.tensor].quantization;
    if (q && !q->is_scales()) bf16 += Bytes{s.box.volume() * dtype_size(q->from)};
  }
  return transfer_time(bf16, delta_cpu_codec_speed(0).quantize);  // whatever the change
}

[[nodiscard]] Result<std::vector<RoundPayloads>> payloads(const Plan& plan, const DeltaSchedule& schedule,
                                                          const DeltaPayloadEstimate& estimate) {
  const auto ranks = static_cast<std::size_t>(plan.world_size());
  std::vector<RoundPayloads> out(
      schedule.hops.size(),
      RoundPayloads{.pieces = std::vector<std::int64_t>(static_cast<std::size_t>(piece_count(plan)), 0),
                    .encode = std::vector<Seconds>(ranks),
                    .decode = std::vector<Seconds>(ranks)});
  std::set<std::tuple<std::int32_t, std::int32_t, std::uint32_t, Box>> boxes;  // (round, sender, tensor, box)
  std::size_t piece = 0;
  for (const auto& t : plan.transfers) {
    const auto r = schedule.round[static_cast<std::size_t>(t.id)];
    auto& round = out[static_cast<std::size_t>(r)];
    if (t.quantizes()) {
      round.encode[static_cast<std::size_t>(t.sender.value)] += quantize_step_time(plan, t);
      piece += t.segments.size();
      continue;
    }
    for (const auto& s : t.segments) {
      const auto& spec = plan.tensors[s.tensor];
      const Bytes bytes = plan.segment_bytes(s);
      const auto what = fmt::format("tensor '{}'", spec.name);
      // A relay that encodes again does so against what it last sent; with baselines that agree
      // (as the audit checks) its payload of a box is the one it received.
      const bool encoded = schedule.forwards[piece] < 0;
      round.pieces[piece++] = std::llround(REFIT_TRY_IN(estimate.expected_bytes(bytes.value, spec), what));
      // The codec's speed at the share of the elements that changed (fp8's is its own).
      const auto speed = delta_cpu_codec_speed(REFIT_TRY_IN(estimate.sample(spec), what).changed_share);
      if (encoded && boxes.emplace(r, t.sender.value, s.tensor, s.box).second)
        round.encode[static_cast<std::size_t>(t.sender.value)] +=
            transfer_time(quantized_at_sender(plan, s), speed.quantize) + transfer_time(bytes, speed.encode);
      round.decode[static_cast<std::size_t>(t.receiver.value)] +=
          transfer_time(bytes, speed.audit) + transfer_time(bytes, speed.decode);
    }
  }
  return out;
}

[[nodiscard]] Result<Seconds> simulate_step(const DeltaPredictionInputs& in, const DeltaStep& step) {
  if (step.plan.transfers.empty()) return Seconds{0};
  const auto job = REFIT_TRY(delta_step_job(step, in.cluster));
  const auto schedule = REFIT_TRY(deploy(in.deployment, job.plan, job.problem, job.cluster));
  auto options = in.simulation;
  options.calls = &schedule;
  return REFIT_TRY(simulate_plan(job.plan, job.problem, job.cluster, options)).predicted;
}

// A round as the executor runs it: the busiest sender's encoding, the payloads' transfers hop after
// hop (each hop's step simulated as the deployment runs it), then the busiest receiver's audit and
// decoding; the next round starts once every rank has decoded.
[[nodiscard]] Result<DeltaRound> predict_round(const DeltaPredictionInputs& in, const DeltaSchedule& schedule,
                                               std::int32_t round, const RoundPayloads& p) {
  DeltaRound out{.moved_bytes = Bytes{0},
                 .encode = Seconds{0},
                 .transfer = Seconds{0},
                 .decode = Seconds{0},
                 .hops = schedule.hops[static_cast<std::size_t>(round)]};
  for (std::int32_t hop = 0; hop < out.hops; ++hop) {
    const auto step = REFIT_TRY(delta_step(in.plan, hop_payloads(in.plan, schedule, p.pieces, round, hop)));
    out.transfer += REFIT_TRY(simulate_step(in, step));
    for (const auto& t : step.plan.transfers) out.moved_bytes += t.bytes;
  }
  for (const Seconds s : p.encode) out.encode = std::max(out.encode, s);
  for (const Seconds s : p.decode) out.decode = std::max(out.decode, s);
  return out;
}

}  // namespace

Result<DeltaPrediction> predict_delta(const DeltaPredictionInputs& in, double change_fraction) {
  REFIT_TRY(check_relays(in.plan, in.problem));
  const auto estimate = REFIT_TRY(DeltaPayloadEstimate::measure(
      SyntheticUpdate{.change_fraction = change_fraction}, schemes_of(in.plan)));
  DeltaPrediction out{.change_fraction = change_fraction,
                      .dense_bytes = Bytes{0},
                      .moved_bytes = Bytes{0},
                      .transfer = Seconds{0},
                      .encode = Seconds{0},
                      .decode = Seconds{0},
                      .predicted = Seconds{0},
                      .rounds = {}};
  for (const auto& t : in.plan.transfers) out.dense_bytes += t.bytes;
  const auto schedule = delta_schedule(in.plan);
  const auto rounds = REFIT_TRY(payloads(in.plan, schedule, estimate));
  for (std::int32_t r = 0; r < schedule.rounds(); ++r) {
    const auto round = REFIT_TRY(predict_round(in, schedule, r, rounds[static_cast<std::size_t>(r)]));
    out.moved_bytes += round.moved_bytes;
    out.encode += round.encode;
    out.transfer += round.transfer;
    out.decode += round.decode;
    out.rounds.push_back(round);
  }
  out.predicted = out.encode + out.transfer + out.decode;
  return out;
}

std::string delta_prediction_note(double change_fraction, bool fp8) {
  const auto speed = delta_cpu_codec_speed(change_fraction);
  return fmt::format(
      "--delta {:g}: payloads measured by encoding a synthetic sample at that change fraction (a relay's "
      "payload of a box taken equal to its sender's, as when their baselines agree); relays forward the "
      "payloads of the boxes they received whole as they arrived, hop after hop, and encode the others "
      "again in a round of their own, each round's encoding, hops and decoding one after another; "
      "encoding at {:.2f} GB/s, "
      "decoding at {:.2f} GB/s and the receivers' audit at {:.2f} GB/s, one CPU core per rank "
      "(bench/delta_bench on the 2-core VM, interpolated){}; the GPU codec has no measured speed, so none is "
      "assumed",
      change_fraction, speed.encode.gbps(), speed.decode.gbps(), speed.audit.gbps(),
      fp8 ? fmt::format("; fp8 values and scales as the quantizer makes them of a sample weight before and "
                        "after the step, the codec at the speed of the share of them that changed, and the "
                        "senders' and landing ranks' CPU quantizer at {:.2f} GB/s of bf16",
                        speed.quantize.gbps())
          : "");
}

}  // namespace refit
