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
#include "refit/topology/cluster.h"

namespace refit::cli {

struct PlanInputOptions {
  ProblemOptions problem;
  ClusterOptions cluster;
  std::string strategy{kDefaultStrategy};
  std::string plan_file;
  std::int64_t chunk_bytes = PlanOptions{}.chunk.value;
};

void add_plan_input_options(CLI::App& cmd, PlanInputOptions& options, bool with_plan_file);

struct PlanInputs {
  ReshardProblem problem;
  Cluster cluster;
};
[[nodiscard]] Result<PlanInputs> load_plan_inputs(const PlanInputOptions& options);

struct TimedPlan {
  Plan plan;
  Seconds seconds;  // wall time spent planning (or loading the plan file)
};
// Plans with `strategy`, or loads options.plan_file; either way checks the plan against the
// problem with validate() (a loaded plan that does not fit is bad input, with validate()'s code;
// a planned one that does not is kInternal).
[[nodiscard]] Result<TimedPlan> obtain_plan(const PlanInputOptions& options, const PlanInputs& inputs,
                                            std::string_view strategy);

}  // namespace refit::cli
