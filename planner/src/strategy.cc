#include "refit/planner/strategy.h"
#include "refit/core/named_table.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"
#include "refit/planner/execution_model.h"
#include "strategies.h"

namespace refit {
namespace {

constexpr std::array<StrategyInfo, 4> kStrategies{{
    {.id = StrategyId::kRefit,
     .name = "refit",
     .description = "each piece enters each destination NVLink domain once, senders balanced over all source "
                    "replicas, replicas completed over NVLink",
     .plan = planner_detail::plan_refit,
     .execution = ExecutionModelId::kRefitUcx},
    {.id = StrategyId::kDirect,
     .name = "direct",
     .description = "NCCL M2N's DIRECT: each selected source sends to every destination replica",
     .plan = planner_detail::plan_direct,
     .execution = ExecutionModelId::kRefitUcx,
     .baseline = true,
     .nccl_m2n = true},
    {.id = StrategyId::kM2nRing,
     .name = "m2n-ring",
     .description = "NCCL M2N's RING: a leader per NVLink domain, chained over the network, NVLink fan-out",
     .plan = planner_detail::plan_m2n_ring,
     .execution = ExecutionModelId::kNcclCollectives,
     .baseline = true,
     .nccl_m2n = true},
    {.id = StrategyId::kGatherBroadcast,
     .name = "gather-broadcast",
     .description = "NeMo RL's default: every full tensor gathered, then broadcast to every rank",
     .plan = planner_detail::plan_gather_broadcast,
     .execution = ExecutionModelId::kNcclCollectives,
     .sends_from_holders = false,
     .baseline = true},
}};

[[nodiscard]] Result<void> check_moved_bytes(const ReshardProblem& problem, const PlanOptions& options) {
  const auto& moved = options.moved_bytes;
  if (moved.empty()) return {};
  if (moved.size() != problem.tensors().size())
    return mismatch(fmt::format("moved bytes are given for {} tensors, the problem has {}", moved.size(),
                                problem.tensors().size()));
  for (std::size_t t = 0; t < moved.size(); ++t)
    if (moved[t].value < 0)
      return out_of_range(fmt::format("tensor '{}': moved bytes {} are negative",
                                      problem.tensors()[t].tensor.name, moved[t].value));
  return {};
}

}  // namespace

std::span<const StrategyInfo> strategies() { return kStrategies; }

const StrategyInfo& strategy_info(StrategyId id) { return kStrategies[static_cast<std::size_t>(id)]; }

Result<const StrategyInfo*> find_strategy(std::string_view name) {
  if (const auto* entry = find_named(kStrategies, name, &StrategyInfo::name)) return entry;
  return not_found(
      fmt::format("unknown strategy '{}' (expected {})", name, names_of(kStrategies, &StrategyInfo::name)));
}

Result<Plan> make_plan(std::string_view strategy, const ReshardProblem& problem, const PlacedCluster& cluster,
                       const PlanOptions& options) {
  return make_plan(*REFIT_TRY(find_strategy(strategy)), problem, cluster, options);
}

Result<Plan> make_plan(const StrategyInfo& strategy, const ReshardProblem& problem,
                       const PlacedCluster& cluster, const PlanOptions& options) {
  REFIT_TRY_IN(cluster.ranks().check(problem), fmt::format("cluster '{}'", cluster.name()));
  REFIT_TRY(check_chunk(options.chunk));
  REFIT_TRY(check_moved_bytes(problem, options));
  planner_detail::PlanContext context{
      .problem = problem, .cluster = cluster, .strategy = strategy, .options = options, .overlaps = {}};
  context.overlaps.reserve(problem.tensors().size());
  for (const auto& t : problem.tensors())
    context.overlaps.push_back(
        REFIT_TRY_IN(overlaps(t.source, t.destination), fmt::format("tensor '{}'", t.tensor.name)));
  // A plan refit's executors run is lowered chunk by chunk, which stops at limits::kMaxChunks: a
  // plan past it could be neither run nor simulated, and its transfers alone once took 4.8 GB.
  const auto max_chunks =
      execution_model(strategy.execution).refit_executor ? limits::kMaxChunks : limits::kMaxPlanChunks;
  REFIT_TRY(check_chunk_count(problem, context.overlaps, options.chunk, max_chunks));
  auto plan = REFIT_TRY(planner_detail::has_landing(problem) ? planner_detail::plan_with_landing(context)
                                                             : strategy.plan(context));
  REFIT_TRY(check_chunk_count(plan));
  return plan;
}

namespace planner_detail {

std::int64_t uniform_source(std::int64_t n_sources, std::int64_t n_dests, std::int64_t dest_index) {
  if (n_sources >= n_dests) return dest_index * n_sources / n_dests;
  const std::int64_t span = ceil_div(n_dests, n_sources);
  return dest_index / span;
}

}  // namespace planner_detail
}  // namespace refit
