#pragma once
// The chain of tasks that made the simulation as long as it was, walked back from the last task
// to end. At each task the walk follows what delayed it:
//  - contention, when its flow ran slower than it would have alone (bytes / smallest capacity on
//    its resources): the latest flow that shared one of its resources and ended while it flowed;
//  - otherwise the dependency that ended last, the one that made it ready.
// Each step owns the time from the previous step's end to its own end, so the steps tile
// [0, makespan] and the breakdown adds up to the makespan.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/simulator/model.h"
#include "refit/simulator/simulate.h"

namespace refit::sim {

struct CriticalPath {
  std::vector<CriticalStep> steps;
  Breakdown breakdown;
};

// flow_completions: the tasks with bytes in the order they ended (so by non-decreasing end).
CriticalPath find_critical_path(const Model& model, std::span<const TaskTiming> timings,
                                std::span<const std::int32_t> flow_completions);

}  // namespace refit::sim
