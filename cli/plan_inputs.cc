#include "plan_inputs.h"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "parse.h"
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
  auto problem = load_problem(o.problem);
  if (!problem) return std::unexpected(problem.error());
  RankPlacementOptions placement;
  placement.source_ranks = problem->source_ranks();
  placement.destination_ranks = problem->destination_ranks();
  auto cluster = load_cluster(o.cluster, placement);
  if (!cluster) return std::unexpected(cluster.error());
  return PlanInputs{std::move(*problem), std::move(*cluster)};
}

Result<TimedPlan> obtain_plan(const PlanInputOptions& o, const PlanInputs& in, std::string_view strategy) {
  const auto start = std::chrono::steady_clock::now();
  Result<Plan> plan = o.plan_file.empty()
                          ? make_plan(strategy, in.problem, in.cluster, PlanOptions{Bytes{o.chunk_bytes}})
                          : load_plan_file(o.plan_file);
  if (!plan) return std::unexpected(plan.error());
  const Seconds seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  if (auto ok = validate(*plan, in.problem); !ok) {
    if (o.plan_file.empty())  // our own plan failed its check: a bug, not the user's input
      return fail(ErrorCode::kRuntime, fmt::format("internal error: strategy '{}' made an invalid plan: {}",
                                                   strategy, ok.error().message));
    return invalid(fmt::format("--plan {}: does not fit the problem: {}", o.plan_file, ok.error().message));
  }
  return TimedPlan{std::move(*plan), seconds};
}

}  // namespace refit::cli
