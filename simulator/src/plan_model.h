#pragma once
// Translation of a Plan into an engine Model (see plan_model.cc for the task shapes).
#include <vector>

#include "refit/core/problem.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/lowering/plan_costs.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/plan.h"
#include "refit/simulator/model.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

enum class TaskKind : std::uint32_t { kNetwork = 0, kNvlink = 1, kCopy = 2 };

struct PlanModel {
  Model model;
  std::vector<std::int32_t> transfer_of_task;  // by TaskId: the transfer it belongs to
  std::vector<Seconds> copy_latency;           // by TaskId: pack/unpack time inside its latency
};

// `window`: chunks in flight per (sender, receiver) pair, whose transfers go in plan order
// (0: no limit and no order). Chunks and copies are the lowering's for every rank holding its
// boxes of `problem`, under `execution`'s zero-copy rule. Preconditions: validate_structure(plan).
[[nodiscard]] Result<PlanModel> build_plan_model(const Plan& plan, const ReshardProblem& problem,
                                                 const PlacedCluster& cluster,
                                                 const ExecutionModel& execution, std::int32_t window);

}  // namespace refit::sim
