#include "refit/refit.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {

Result<Plan> plan(const ReshardProblem& problem, const PlacedCluster& cluster, std::string_view strategy,
                  const PlanOptions& options) {
  auto made = REFIT_TRY(make_plan(strategy, problem, cluster, options));
  if (auto ok = validate(made, problem); !ok)
    return fail(ErrorCode::kInternal, fmt::format("internal error: strategy '{}' made an invalid plan: {}",
                                                  strategy, ok.error().message));
  return made;
}

Result<ExecutionReport> run(Executor& executor, const Plan& plan, Rank rank, const RankBuffers& buffers) {
  auto prepared = REFIT_TRY(executor.prepare(plan, rank, buffers));
  return executor.execute(*prepared);
}

}  // namespace refit
