#include "ray_dispatch.h"

#include <algorithm>
#include <set>

#include <fmt/format.h>

#include "m2n_calls.h"

namespace refit::sim {
namespace {

// The most distinct destination boxes of a tensor other than a routed expert: vLLM's TP size.
std::int32_t tensor_parallel_size(const ReshardProblem& problem) {
  std::size_t most = 1;
  for (const auto& t : problem.tensors()) {
    if (is_routed_expert(t.tensor.name)) continue;
    std::set<Box> boxes;
    const auto positions = static_cast<std::int64_t>(t.destination.mesh().ranks().size());
    for (std::int64_t p = 0; p < positions; ++p) boxes.insert(t.destination.box_at_position(p));
    most = std::max(most, boxes.size());
  }
  return static_cast<std::int32_t>(most);
}

}  // namespace

std::int32_t ray_actors(const ReshardProblem& problem) {
  const std::int32_t tp = tensor_parallel_size(problem);
  return problem.source_ranks() + (problem.destination_ranks() + tp - 1) / tp;
}

Seconds ray_dispatch_time(const DeploymentConstants& constants, std::int32_t actors) {
  return constants.ray_round_trip + constants.ray_async_call * static_cast<double>(actors);
}

void add_ray_dispatch(const ReshardProblem& problem, const DeploymentConstants& constants,
                      CallSchedule& schedule) {
  std::int32_t own_queue = 0;
  std::set<std::int32_t> queues;
  for (Call& call : schedule.calls) {
    own_queue = std::max(own_queue, call.queue + 1);
    for (std::int32_t& a : call.after) ++a;
    if (queues.insert(call.queue).second) call.after.insert(call.after.begin(), 0);
  }
  const std::int32_t actors = ray_actors(problem);
  schedule.calls.insert(schedule.calls.begin(),
                        Call{.label = fmt::format("Ray dispatch to {} workers", actors),
                             .group = "Ray dispatch",
                             .queue = own_queue,
                             .launch = ray_dispatch_time(constants, actors)});
}

}  // namespace refit::sim
