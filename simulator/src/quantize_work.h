#pragma once
// FP8 in flight in the simulator: which ranks quantize how many bytes, and which transfers wait
// for a sender's quantization or feed a receiver's (core/quantization.h says who quantizes).
#include <array>
#include <span>
#include <string_view>
#include <vector>

#include "refit/core/problem.h"
#include "refit/core/units.h"
#include "refit/lowering/sender_quantize_order.h"
#include "refit/planner/plan.h"
#include "refit/topology/cluster.h"

namespace refit::sim {

// Source-dtype bytes per FP8 format.
using BytesPerScheme = PerScheme<Bytes>;

// Source-dtype bytes quantized into one FP8 format.
struct QuantizeBytes {
  Bytes source;
  QuantScheme scheme = QuantScheme::kFp8Block128;
};

struct QuantizeWork {
  // Which boxes each sender quantizes, in what order, and which each chunk waits for.
  lowering::SenderQuantizeOrder sender_order;
  // Per rank: each box of sender_order.weights.
  std::vector<std::vector<QuantizeBytes>> sender_boxes;
  // Per rank and FP8 format (QuantScheme): the source-dtype bytes it quantizes once they landed.
  std::vector<BytesPerScheme> receiver_bytes;
  std::vector<bool> before_receiver;  // per transfer: lands data its receiver quantizes
};

// A sender quantizes its whole box of every weight it sends some of (the executors quantize a
// shard once, then send from it), box by box in `order` (sender_quantize_order of the plan); a
// receiver its whole box of every weight it receives some of. Preconditions:
// validate(plan, problem).
QuantizeWork quantize_work(const Plan& plan, const ReshardProblem& problem,
                           lowering::SenderQuantizeOrder order);

// At the GPU's measured quantize bandwidth for the format (GpuSpec::quantize_bandwidth) where the
// cluster has one. Otherwise from the GPU's copy bandwidth: a quantizer and a copy are both
// memory-bound, and refit's quantize kernel reads as many bf16 bytes per byte its copy kernel
// copies as it did on the GPU both were measured on (quantize_from_copy, measured_kernels.h).
Seconds quantize_time(Bytes source_bytes, QuantScheme scheme, const GpuSpec& gpu);
// The time of `work` on `gpu`.
inline Seconds quantize_time(const QuantizeBytes& work, const GpuSpec& gpu) {
  return quantize_time(work.source, work.scheme, gpu);
}
// What quantize_time assumes where a GPU has no measured rate, as a prediction says it, with the
// measured figures it scales.
std::string quantize_rate_assumption();
// Whether quantize_time assumes that rate for some GPU of `cluster` and some format a tensor of
// `problem` is quantized into.
bool quantize_rate_assumed(const Cluster& cluster, const ReshardProblem& problem);

}  // namespace refit::sim
