#pragma once
// What the deployments' call builders share: their inputs, appending a call, and an NCCL ring
// collective with the latency and efficiency NCCL's cost model and the published bus
// bandwidths give it.
#include <span>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/simulator/calls.h"
#include "refit/simulator/deployment.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

struct DeployInputs {
  const Plan& plan;
  const ReshardProblem& problem;
  const PlacedCluster& cluster;
  const DeploymentConstants& constants;
  const StrategyInfo& strategy;  // whose plan it is
};

// Appends `call`; returns its index.
std::int32_t add_call(CallSchedule& schedule, Call call);

// The communicator `ranks` as NCCL's cost model counts it: its ranks and NVLink domains.
RingShape ring_shape(std::span<const Rank> ranks, const PlacedCluster& cluster);

// A ring collective over `ranks` (root first for a broadcast) moving `bytes` (a broadcast's
// buffer, an all-gather's gathered total), at NCCL's modelled latency, and at the published
// network efficiency of its kind when the ring leaves an NVLink domain.
Collective ring_collective(CollectiveKind kind, std::vector<Rank> ranks, Bytes bytes, const DeployInputs& in);

// The bytes `rank` holds of problem tensor `tensor`: its source or destination box.
Bytes held_bytes(const ReshardProblem& problem, std::int32_t tensor, Rank rank);

// A weight the inference engine quantizes as it loads it (FP8 at the receivers): NeMo RL's
// fp8.load_weights casts each such weight to fp8 values and scales, then vLLM loads those.
bool quantized_on_loading(const TensorSpec& t);
// What an engine copies into its parameters for `source_bytes` (in the weight's source dtype) of
// such a weight once cast: an fp8 value per element, and a scale per block's worth of elements.
Bytes cast_bytes(const TensorSpec& t, Bytes source_bytes);
// Says, when some call of `schedule` quantizes, at what rate the engines' cast is charged.
void note_engine_cast(CallSchedule& schedule);

}  // namespace refit::sim
