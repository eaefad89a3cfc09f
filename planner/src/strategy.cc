#include "refit/planner/strategy.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "strategies.h"

namespace refit {
namespace {

using StrategyFn = Result<Plan> (*)(const planner_detail::PlanContext&);

struct StrategyEntry {
  std::string_view name;
  StrategyFn plan;
  bool nccl_collective;  // a baseline that stands for today's NCCL collectives
};

constexpr std::array<StrategyEntry, 4> kStrategies{{
    {"refit", planner_detail::plan_refit, false},
    {"direct", planner_detail::plan_direct, false},
    {"m2n-ring", planner_detail::plan_m2n_ring, true},
    {"gather-broadcast", planner_detail::plan_gather_broadcast, true},
}};

constexpr std::array<std::string_view, 4> kNames{"refit", "direct", "m2n-ring", "gather-broadcast"};

[[nodiscard]] Result<void> check_placement(const ReshardProblem& p, const Cluster& c) {
  if (c.rank_count() != p.world_size() || c.source_ranks() != p.source_ranks())
    return mismatch(fmt::format(
        "cluster '{}' places {} ranks ({} training), the problem has {} ({} training, {} inference)",
        c.name(), c.rank_count(), c.source_ranks(), p.world_size(), p.source_ranks(), p.destination_ranks()));
  return {};
}

}  // namespace

std::span<const std::string_view> strategy_names() { return kNames; }

bool is_nccl_collective(std::string_view strategy) {
  const auto* entry = std::ranges::find(kStrategies, strategy, &StrategyEntry::name);
  return entry != kStrategies.end() && entry->nccl_collective;
}

Result<Plan> make_plan(std::string_view strategy, const ReshardProblem& problem, const Cluster& cluster,
                       const PlanOptions& options) {
  const auto* entry = std::ranges::find(kStrategies, strategy, &StrategyEntry::name);
  if (entry == kStrategies.end())
    return not_found(fmt::format(
        "unknown strategy '{}' (expected refit, direct, m2n-ring or gather-broadcast)", strategy));
  REFIT_TRY(check_placement(problem, cluster));
  if (options.chunk.value <= 0) return out_of_range("chunk must be > 0 bytes");
  planner_detail::PlanContext context{
      .problem = problem, .cluster = cluster, .options = options, .overlaps = {}};
  context.overlaps.reserve(problem.tensors().size());
  for (const auto& t : problem.tensors())
    context.overlaps.push_back(
        REFIT_TRY_IN(overlaps(t.source, t.destination), fmt::format("tensor '{}'", t.tensor.name)));
  return entry->plan(context);
}

namespace planner_detail {

std::int64_t uniform_source(std::int64_t n_sources, std::int64_t n_dests, std::int64_t dest_index) {
  if (n_sources >= n_dests) return dest_index * n_sources / n_dests;
  const std::int64_t span = (n_dests + n_sources - 1) / n_sources;
  return dest_index / span;
}

}  // namespace planner_detail
}  // namespace refit
