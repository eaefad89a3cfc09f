#pragma once
// Strategies turn a problem and a cluster into a Plan. All of them produce the same Plan type,
// so every executor runs any of them and the simulator compares them on one hardware model.
#include <span>
#include <string_view>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/topology/cluster.h"

namespace refit {

struct PlanOptions {
  // Relays forward in chunks of this size; also the staging unit of the executors.
  Bytes chunk{8 << 20};
  // gather-broadcast: NeMo RL packs full tensors into buffers of at most this size.
  Bytes broadcast_buffer{Bytes{5} * (std::int64_t{1} << 30)};
};

// "refit" (the default), "direct", "m2n-ring", "gather-broadcast".
std::span<const std::string_view> strategy_names();
inline constexpr std::string_view kDefaultStrategy = "refit";

// Whether the strategy is a baseline standing for today's NCCL collectives (m2n-ring: NCCL's
// M2N reshard; gather-broadcast: a gather and ncclBroadcast), which NCCL runs with a channel per
// ring step, rather than one that refit's own executors run.
bool is_nccl_collective(std::string_view strategy);

// Refuses an unknown strategy, and a cluster whose rank placement does not match the problem.
[[nodiscard]] Result<Plan> make_plan(std::string_view strategy, const ReshardProblem& problem,
                                     const Cluster& cluster, const PlanOptions& options = {});

}  // namespace refit
