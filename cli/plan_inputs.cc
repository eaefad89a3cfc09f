#include "plan_inputs.h"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "parse.h"
#include "refit/core/try.h"
#include "refit/planner/plan_json.h"

namespace refit::cli {

void add_plan_input_options(CLI::App& cmd, PlanInputOptions& o, bool with_plan_file) {
  add_problem_options(&cmd, o.problem);
  add_cluster_options(cmd, o.cluster);
  cmd.add_option(
      "--strategy", o.strategy,
      fmt::format("Planning strategy: {} (default {})", fmt::join(strategy_names(), ", "), kDefaultStrategy));
  cmd.add_option("--chunk", o.chunk_bytes, "Relay chunk size in bytes (default 8 MiB)")->check(positive());
  if (with_plan_file)
    cmd.add_option("--plan", o.plan_file, "Use this plan (from refit plan --out) instead of planning");
}

Result<PlanInputs> load_plan_inputs(const PlanInputOptions& o) {
  auto problem = REFIT_TRY(load_problem(o.problem));
  RankPlacementOptions placement;
  placement.source_ranks = problem.source_ranks();
  placement.destination_ranks = problem.destination_ranks();
  auto cluster = REFIT_TRY(load_cluster(o.cluster, placement));
  return PlanInputs{.problem = std::move(problem), .cluster = std::move(cluster)};
}

Result<TimedPlan> obtain_plan(const PlanInputOptions& o, const PlanInputs& in, std::string_view strategy) {
  const auto start = std::chrono::steady_clock::now();
  auto plan = REFIT_TRY(o.plan_file.empty() ? make_plan(strategy, in.problem, in.cluster,
                                                        PlanOptions{.chunk = Bytes{o.chunk_bytes}})
                                            : load_plan_file(o.plan_file));
  const Seconds seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  if (!o.plan_file.empty()) {
    REFIT_TRY_IN(validate(plan, in.problem), fmt::format("--plan {}: does not fit the problem", o.plan_file));
  } else if (auto ok = validate(plan, in.problem); !ok) {
    // Our own plan failed its check: a bug to report, not the user's input.
    return fail(ErrorCode::kInternal, fmt::format("internal error: strategy '{}' made an invalid plan: {}",
                                                  strategy, ok.error().message));
  }
  return TimedPlan{.plan = std::move(plan), .seconds = seconds};
}

}  // namespace refit::cli
