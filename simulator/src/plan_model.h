#pragma once
// Translation of a Plan, run as a CallSchedule says, into an engine Model (see plan_model.cc for
// the task shapes).
#include <vector>

#include "refit/core/problem.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/lowering/plan_costs.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/plan.h"
#include "refit/simulator/calls.h"
#include "refit/simulator/model.h"
#include "refit/topology/rank_map.h"
#include "routes.h"

namespace refit::sim {

struct PlanModel {
  Model model;
  std::vector<std::int32_t> transfer_of_task;  // by TaskId: its transfer, -1 for call tasks
  std::vector<std::int32_t> call_of_task;      // by TaskId: its call, -1 without a schedule
  std::vector<Seconds> copy_latency;           // by TaskId: pack/unpack time inside its latency
};

struct PlanModelOptions {
  // Chunks in flight per (sender, receiver) pair, whose transfers go in call then plan order
  // (0: no limit and no order).
  std::int32_t window = 0;
  // How the plan is cut into calls; nullptr runs every transfer in one go, with no call costs.
  const CallSchedule* calls = nullptr;
  // The executors' staging per rank, which sets their chunks (ExecutorOptions::staging).
  Bytes staging = lowering::kDefaultStaging;
};

// Chunks and copies are the lowering's for every rank holding its boxes of `problem`, under
// `execution`'s zero-copy rule. Refuses a plan that breaks validate_structure, and a schedule
// whose calls name unknown transfers or ranks, name a transfer twice, run a relay before the
// transfer it forwards, or depend on later calls.
[[nodiscard]] Result<PlanModel> build_plan_model(const Plan& plan, const ReshardProblem& problem,
                                                 const PlacedCluster& cluster,
                                                 const ExecutionModel& execution,
                                                 const PlanModelOptions& options);

}  // namespace refit::sim
