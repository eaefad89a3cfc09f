#pragma once
// Checks a Model before it is simulated, and builds the reverse dependency graph that both the
// cycle check and the engine need.
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/simulator/model.h"

namespace refit::sim {

// For each task, the tasks that depend on it (CSR).
struct Dependents {
  std::vector<std::uint32_t> begin;  // task_count + 1 offsets
  std::vector<std::int32_t> tasks;
  std::span<const std::int32_t> of(std::int32_t task) const {
    const auto t = static_cast<std::size_t>(task);
    return {tasks.data() + begin[t], begin[t + 1] - begin[t]};
  }
};

// "task 12 'label'" or "task 12": how errors name a task.
std::string describe_task(const Model& model, TaskId task);

// Capacities, byte counts, latencies, and every resource, track and dependency id.
[[nodiscard]] Result<void> check_model(const Model& model);
// Requires check_model to have passed.
Dependents build_dependents(const Model& model);
[[nodiscard]] Result<void> check_acyclic(const Model& model, const Dependents& dependents);

}  // namespace refit::sim
