#include "refit/refit.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/planner/links.h"
#include "refit/planner/plan_json.h"

namespace refit {

Result<Plan> plan(const ReshardProblem& problem, const PlacedCluster& cluster, std::string_view strategy,
                  const PlanOptions& options) {
  auto made = REFIT_TRY(make_plan(strategy, problem, cluster, options));
  if (auto ok = validate(made, problem); !ok)
    return fail(ErrorCode::kInternal, fmt::format("internal error: strategy '{}' made an invalid plan: {}",
                                                  strategy, ok.error().message));
  REFIT_TRY_IN(check_network_ends(made, cluster), fmt::format("strategy '{}'", strategy));
  return made;
}

namespace {

// A loaded plan's label against its contents (see load_plan).
[[nodiscard]] Result<void> check_label(const Plan& plan, const ReshardProblem& problem,
                                       const PlacedCluster& cluster) {
  const auto strategy = find_strategy(plan.strategy);
  if (!strategy || !(*strategy)->baseline) {
    if (!execution_model(plan.execution).refit_executor)
      return mismatch(
          fmt::format("strategy '{}' is run by refit's executors, not by the execution model '{}' "
                      "the plan names",
                      plan.strategy, execution_model(plan.execution).name));
    return {};
  }
  // The --chunk it was planned with is one of its transfers' chunks (a strategy may cut some
  // transfers finer, as m2n-ring's ring steps): the plan is that strategy's if one reproduces it.
  std::set<std::int64_t> chunks{PlanOptions{}.chunk.value};
  for (const auto& t : plan.transfers) chunks.insert(t.chunk.value);
  constexpr std::size_t kChunkSizesOfAStrategy = 3;  // the option, the default and a strategy's own
  const auto mine = plan_hash(plan);
  if (chunks.size() > kChunkSizesOfAStrategy) chunks.clear();  // no strategy's: nothing to re-plan
  for (const auto chunk : chunks) {
    const auto made = make_plan(**strategy, problem, cluster, PlanOptions{.chunk = Bytes{chunk}});
    if (made && plan_hash(*made) == mine) return {};
  }
  return mismatch(
      fmt::format("it says strategy '{}', but its transfers are not what {} plans for this problem and "
                  "cluster at any of its chunk sizes; a baseline's deployment is modelled for its own "
                  "plan: label an edited or hand-made plan 'refit' to predict it as refit's executors run it",
                  plan.strategy, plan.strategy));
}

}  // namespace

Result<Plan> load_plan(const std::string& path, const ReshardProblem& problem, const PlacedCluster& cluster) {
  const auto where = fmt::format("--plan {}", path);
  auto plan = REFIT_TRY_IN(load_plan_file(path), where);
  REFIT_TRY_IN(validate(plan, problem), where + ": does not fit the problem");
  REFIT_TRY_IN(check_links(plan, cluster), where + ": does not fit the cluster");
  REFIT_TRY_IN(check_label(plan, problem, cluster), where);
  return plan;
}

DeltaRebalance delta_rebalance(ReshardProblem problem, PlacedCluster cluster, std::string strategy,
                               PlanOptions options, double max_drift) {
  return DeltaRebalance{
      .replan =
          [problem = std::move(problem), cluster = std::move(cluster), strategy = std::move(strategy),
           options = std::move(options)](std::vector<Bytes> moved) {
            auto weighed = options;
            weighed.moved_bytes = std::move(moved);
            weighed.neighbour_relays = false;  // a delta refit takes no relay's scratch
            return plan(problem, cluster, strategy, weighed);
          },
      .max_drift = max_drift};
}

Result<ExecutionReport> run(Executor& executor, const Plan& plan, Rank rank, const RankBuffers& buffers) {
  auto prepared = REFIT_TRY(executor.prepare(plan, rank, buffers));
  return executor.execute(*prepared);
}

}  // namespace refit
