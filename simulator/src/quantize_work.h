#pragma once
// FP8 in flight in the simulator: which ranks quantise how many bytes, and which transfers wait
// for a sender's quantisation or feed a receiver's (core/quantization.h says who quantises).
#include <vector>

#include "refit/core/problem.h"
#include "refit/core/units.h"
#include "refit/planner/plan.h"
#include "refit/topology/cluster.h"

namespace refit::sim {

struct QuantizeWork {
  std::vector<Bytes> sender_bytes;    // per rank: source-dtype bytes it quantises before it sends
  std::vector<Bytes> receiver_bytes;  // per rank: source-dtype bytes it quantises once they landed
  std::vector<bool> after_sender;     // per transfer: carries values or scales its sender makes
  std::vector<bool> before_receiver;  // per transfer: lands data its receiver quantises
  bool any() const;
};

// A sender quantises its whole box of every weight it sends some of (the executors quantise a
// shard once, then send from it); a receiver its whole box of every weight it receives some of.
// Preconditions: validate(plan, problem).
QuantizeWork quantize_work(const Plan& plan, const ReshardProblem& problem);

// A quantiser is memory-bound: per element it reads the source dtype (2 bytes of bf16) and writes
// one fp8 byte (the scales are 1/16384 or 1/32 of that), a device copy reads and writes the same
// bytes. So at the same effective memory bandwidth, 2 * copy_bandwidth, quantising b bytes of bf16
// moves 1.5 b and takes 0.75 b / copy_bandwidth.
Seconds quantize_time(Bytes source_bytes, const GpuSpec& gpu);

}  // namespace refit::sim
