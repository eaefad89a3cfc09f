#pragma once
// Strategies turn a problem and a placed cluster into a Plan. All of them produce the same Plan
// type, so every executor runs any of them and the simulator compares them on one hardware model.
// They are one table (strategies()): a strategy's name is looked up there and nowhere else.
#include <span>
#include <string_view>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit {

// m2n-ring cuts strided pieces into chunks of this size for its ring pipeline, as M2N does.
inline constexpr Bytes kM2nRingChunk{256 << 10};

struct PlanOptions {
  // Relays forward in chunks of this size; also the staging unit of the executors.
  Bytes chunk{8 << 20};
  // gather-broadcast: NeMo RL packs full tensors into buffers of at most this size.
  Bytes broadcast_buffer{Bytes{5} * (std::int64_t{1} << 30)};
  // Delta refit (docs/delta.md): by tensor of the problem, the bytes a step is expected to move for
  // one whole copy of the tensor (its payload; 0 for a tensor that does not change). The refit
  // strategy balances its senders, landing ranks and relays by these bytes instead of the dense
  // ones, each piece weighing its share of its tensor's; the other strategies choose no sender by
  // bytes and ignore them. Plan statistics and the lower bound stay dense. Empty: every tensor
  // moves its dense bytes (a refit without deltas), the plan of the options without it.
  std::vector<Bytes> moved_bytes;
  // refit: where some of a domain's NICs would send for longer than the others, part of what they
  // send first hops over NVLink to a rank of the job beside them behind a NIC with room, which
  // sends it on and keeps it outside its own boxes meanwhile (a relay's scratch). A delta refit
  // keeps its baselines in the ranks' own boxes and takes no scratch: its plans are made without.
  bool neighbour_relays = true;
};

enum class StrategyId : std::uint8_t { kRefit, kDirect, kM2nRing, kGatherBroadcast };

namespace planner_detail {
struct PlanContext;
}

struct StrategyInfo {
  StrategyId id = StrategyId::kRefit;
  std::string_view name;         // "refit", "direct", "m2n-ring", "gather-broadcast"
  std::string_view description;  // one line for --help
  Result<Plan> (*plan)(const planner_detail::PlanContext&) = nullptr;
  ExecutionModelId execution = ExecutionModelId::kRefitUcx;  // what runs its plans (Plan::execution)
  // It sends a tensor from whichever ranks hold it, so it can send fp8 from landing ranks
  // (core/quantization.h); gather-broadcast sends everything from training rank 0.
  bool sends_from_holders = true;
  // It stands for an algorithm of today's refit systems (a baseline), not refit's own: a plan
  // that names it must be what that algorithm makes, and the simulator's deployments of those
  // systems run it (simulator/deployment.h).
  bool baseline = false;
  // One of NCCL M2N's algorithms (DIRECT, RING): what nccl_reshard and reshard_model_bench run.
  bool nccl_m2n = false;
};

// Every strategy, in StrategyId order; the first is the default.
std::span<const StrategyInfo> strategies();
const StrategyInfo& strategy_info(StrategyId id);
inline constexpr StrategyId kDefaultStrategy = StrategyId::kRefit;
// kNotFound naming the known strategies for an unknown name.
[[nodiscard]] Result<const StrategyInfo*> find_strategy(std::string_view name);

// Refuses a placement whose rank counts do not match the problem, and moved_bytes that do not give
// one size >= 0 per tensor.
[[nodiscard]] Result<Plan> make_plan(const StrategyInfo& strategy, const ReshardProblem& problem,
                                     const PlacedCluster& cluster, const PlanOptions& options = {});
// The same with the strategy by name; refuses an unknown name.
[[nodiscard]] Result<Plan> make_plan(std::string_view strategy, const ReshardProblem& problem,
                                     const PlacedCluster& cluster, const PlanOptions& options = {});

}  // namespace refit
