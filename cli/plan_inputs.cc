#include "plan_inputs.h"

#include <chrono>
#include <filesystem>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "output_paths.h"
#include "parse.h"
#include "refit/core/elapsed.h"
#include "refit/core/try.h"
#include "refit/core/utf8.h"
#include "refit/models/hf_config.h"
#include "refit/refit.h"
#include "say.h"

namespace refit::cli {

namespace {

std::string strategy_list() {
  std::vector<std::string_view> names;
  for (const auto& s : strategies()) names.push_back(s.name);
  return fmt::format("{}", fmt::join(names, ", "));
}

}  // namespace

void add_plan_input_options(CLI::App& cmd, PlanInputOptions& o, bool with_plan_file) {
  add_problem_options(&cmd, o.problem);
  add_cluster_options(cmd, o.cluster);
  auto* strategy = cmd.add_option("--strategy", o.strategy,
                                  fmt::format("Planning strategy: {} (default {})", strategy_list(),
                                              strategy_info(kDefaultStrategy).name))
                       ->check(accepted_by(
                           [](std::string_view name) -> Result<void> {
                             REFIT_TRY(find_strategy(name));
                             return {};
                           },
                           "STRATEGY"));
  auto* chunk = cmd.add_option("--chunk", o.chunk_bytes,
                               "Largest chunk a message is cut into, in bytes (default 8 MiB); refit's plan "
                               "cuts what relays forward finer")
                    ->check(positive());
  // A plan file has its strategy and chunks: options that would plan otherwise are refused with it.
  if (with_plan_file)
    cmd.add_option("--plan", o.plan_file, "Use this plan (from refit plan --out) instead of planning")
        ->check(non_empty())
        ->excludes(strategy)
        ->excludes(chunk);
}

Result<void> check_not_an_input(std::string_view option, const std::string& path, const PlanInputOptions& o) {
  const InputFile inputs[] = {{"--plan", o.plan_file},
                              {"--cluster-file", o.cluster.file},
                              {"--nccl-topo-xml", o.cluster.nccl_xml},
                              {"--manifest", o.problem.manifest},
                              {"--model", models::hf_config_file(o.problem.model)}};
  return check_not_an_input(option, path, inputs);
}

Result<PlanInputs> load_plan_inputs(const PlanInputOptions& o) {
  auto problem = REFIT_TRY(load_problem(o.problem));
  if (o.problem.manifest.empty())
    for (const auto& note : REFIT_TRY(resolve_layouts(o.problem)).notes)
      say("refit: note: {}\n", escaped_line(note));
  auto cluster = REFIT_TRY(load_cluster_for(o.cluster, job_of(problem)));
  return PlanInputs{.problem = std::move(problem), .cluster = std::move(cluster)};
}

Result<TimedPlan> obtain_plan(const PlanInputOptions& o, const PlanInputs& in, std::string_view strategy) {
  const auto start = std::chrono::steady_clock::now();
  auto plan = REFIT_TRY(o.plan_file.empty() ? refit::plan(in.problem, in.cluster, strategy, o.plan_options())
                                            : load_plan(o.plan_file, in.problem, in.cluster));
  return TimedPlan{.plan = std::move(plan), .seconds = seconds_since(start)};
}

}  // namespace refit::cli
