#pragma once
// What `refit plan` and `refit simulate` share: PROBLEM and CLUSTER options, the strategy, and a
// plan file to use instead of planning.
#include <memory>
#include <optional>
#include <string>

#include <CLI/CLI.hpp>

#include "cluster_options.h"
#include "problem_options.h"
#include "refit/planner/plan.h"
#include "refit/planner/strategy.h"
#include "refit/topology/rank_map.h"

namespace refit::cli {

struct PlanInputOptions {
  ProblemSource problem;
  ClusterSource cluster;
  std::string strategy{strategy_info(kDefaultStrategy).name};
  std::string plan_file;
  std::int64_t chunk_bytes = PlanOptions{}.chunk.value;
  bool for_delta = false;  // planned for a delta refit (run --delta): no relay keeps scratch

  PlanOptions plan_options() const { return {.chunk = Bytes{chunk_bytes}, .neighbour_relays = !for_delta}; }
};

void add_plan_input_options(CLI::App& cmd, PlanInputOptions& options, bool with_plan_file);

struct PlanInputs {
  ReshardProblem problem;
  PlacedCluster cluster;  // sized to the problem's job, its ranks placed
};
[[nodiscard]] Result<PlanInputs> load_plan_inputs(const PlanInputOptions& options);

// Refuses an output (`option` = `path`) that is one of the files the inputs are read from (a plan,
// a cluster file or topology dump, a manifest, a model's config.json): written over, the input
// would be lost to a file of another kind.
[[nodiscard]] Result<void> check_not_an_input(std::string_view option, const std::string& path,
                                              const PlanInputOptions& options);

struct TimedPlan {
  Plan plan;
  Seconds seconds;  // wall time spent planning (or loading the plan file)
};
// Plans with `strategy` (the facade's plan(): a plan a strategy gets wrong is kInternal), or
// loads options.plan_file and checks it against the problem with validate() (a loaded plan that
// does not fit is bad input, with validate()'s code).
[[nodiscard]] Result<TimedPlan> obtain_plan(const PlanInputOptions& options, const PlanInputs& inputs,
                                            std::string_view strategy);

}  // namespace refit::cli
