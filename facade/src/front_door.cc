#include "refit/refit.h"

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
  return made;
}

namespace {

// A loaded plan's label against its contents (see load_plan).
[[nodiscard]] Result<void> check_label(const Plan& plan, const ReshardProblem& problem,
                                       const PlacedCluster& cluster) {
  const auto strategy = find_strategy(plan.strategy);
  if (!strategy || (*strategy)->id == StrategyId::kRefit) {
    if (plan.execution == ExecutionModelId::kNcclCollectives)
      return mismatch(
          fmt::format("strategy '{}' is run by refit's executors, not by the execution model '{}' "
                      "the plan names",
                      plan.strategy, execution_model(plan.execution).name));
    return {};
  }
  const auto chunk = plan.transfers.empty() ? PlanOptions{}.chunk : plan.transfers.front().chunk;
  const auto made = REFIT_TRY_IN(make_plan(**strategy, problem, cluster, PlanOptions{.chunk = chunk}),
                                 fmt::format("planning '{}' to compare", plan.strategy));
  if (plan_hash(made) != plan_hash(plan))
    return mismatch(
        fmt::format("it says strategy '{}', but its transfers are not what {} plans for this problem "
                    "and cluster (hash {}, {} makes {}); a baseline's deployment is modelled for its "
                    "own plan: label an edited or hand-made plan 'refit' to predict it as refit's "
                    "executors run it",
                    plan.strategy, plan.strategy, plan_hash_hex(plan), plan.strategy, plan_hash_hex(made)));
  return {};
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

Result<ExecutionReport> run(Executor& executor, const Plan& plan, Rank rank, const RankBuffers& buffers) {
  auto prepared = REFIT_TRY(executor.prepare(plan, rank, buffers));
  return executor.execute(*prepared);
}

}  // namespace refit
