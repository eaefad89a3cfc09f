#include "delta_prediction.h"

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/delta/codec_speed.h"
#include "refit/delta/payload_estimate.h"
#include "refit/executors/delta_step.h"

namespace refit {
namespace {

// Each piece's expected payload, and per rank the dense bytes it encodes (each box it sends once,
// whatever the number of its receivers, as the executor does) and receives.
struct Payloads {
  std::vector<std::int64_t> pieces;
  std::vector<Bytes> encoded;   // by rank
  std::vector<Bytes> received;  // by rank
};

[[nodiscard]] Result<Payloads> payloads(const Plan& plan, const DeltaPayloadEstimate& estimate) {
  const auto ranks = static_cast<std::size_t>(plan.world_size());
  Payloads out{.pieces = {}, .encoded = std::vector<Bytes>(ranks), .received = std::vector<Bytes>(ranks)};
  std::set<std::tuple<std::int32_t, std::uint32_t, Box>> boxes;  // (sender, tensor, box) encoded
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments) {
      const Bytes bytes = plan.segment_bytes(s);
      const double expected = REFIT_TRY_IN(estimate.expected_bytes(bytes.value, plan.tensors[s.tensor].dtype),
                                           fmt::format("tensor '{}'", plan.tensors[s.tensor].name));
      out.pieces.push_back(std::llround(expected));
      if (boxes.emplace(t.sender.value, s.tensor, s.box).second)
        out.encoded[static_cast<std::size_t>(t.sender.value)] += bytes;
      out.received[static_cast<std::size_t>(t.receiver.value)] += bytes;
    }
  return out;
}

[[nodiscard]] Result<Seconds> simulate_step(const DeltaPredictionInputs& in, const DeltaStep& step) {
  if (step.plan.transfers.empty()) return Seconds{0};
  const auto problem = REFIT_TRY(delta_step_problem(step));
  const auto schedule = REFIT_TRY(deploy(in.deployment, step.plan, problem, in.cluster));
  auto options = in.simulation;
  options.calls = &schedule;
  return REFIT_TRY(simulate_plan(step.plan, problem, in.cluster, options)).predicted;
}

// The step's plan is simulated as one round from the senders' own shards; a relay's rounds (the
// executor's) are not modelled yet.
[[nodiscard]] Result<void> check_no_relays(const Plan& plan) {
  for (const auto& t : plan.transfers)
    if (!t.upstream().empty())
      return unsupported(
          fmt::format("transfer {} forwards what rank {} received, and the prediction of a "
                      "delta refit's relay rounds is not written yet (--strategy direct)",
                      t.id, t.sender.value));
  return {};
}

}  // namespace

Result<DeltaPrediction> predict_delta(const DeltaPredictionInputs& in, double change_fraction) {
  REFIT_TRY(check_delta_plan(in.plan));
  REFIT_TRY(check_no_relays(in.plan));
  const auto estimate =
      REFIT_TRY(DeltaPayloadEstimate::measure(SyntheticUpdate{.change_fraction = change_fraction}));
  const auto p = REFIT_TRY(payloads(in.plan, estimate));
  const auto step = REFIT_TRY(delta_step(in.plan, p.pieces));
  const auto speed = delta_cpu_codec_speed(change_fraction);
  DeltaPrediction out{.change_fraction = change_fraction,
                      .dense_bytes = Bytes{0},
                      .moved_bytes = Bytes{0},
                      .transfer = REFIT_TRY(simulate_step(in, step)),
                      .encode = {},
                      .decode = {},
                      .predicted = {}};
  for (const auto& t : in.plan.transfers) out.dense_bytes += t.bytes;
  for (const auto& t : step.plan.transfers) out.moved_bytes += t.bytes;
  for (const Bytes b : p.encoded) out.encode = std::max(out.encode, transfer_time(b, speed.encode));
  for (const Bytes b : p.received)
    out.decode = std::max(out.decode, transfer_time(b, speed.audit) + transfer_time(b, speed.decode));
  out.predicted = out.encode + out.transfer + out.decode;
  return out;
}

std::string delta_prediction_note(double change_fraction) {
  const auto speed = delta_cpu_codec_speed(change_fraction);
  return fmt::format(
      "--delta {:g}: payloads measured by encoding a synthetic sample at that change fraction; encoding at "
      "{:.2f} GB/s, decoding at {:.2f} GB/s and the receivers' audit at {:.2f} GB/s, one CPU core per rank "
      "(bench/delta_bench on the 2-core VM, interpolated); the GPU codec has no measured speed, so none is "
      "assumed",
      change_fraction, speed.encode.gbps(), speed.decode.gbps(), speed.audit.gbps());
}

}  // namespace refit
