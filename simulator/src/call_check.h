#pragma once
// The checks a CallSchedule must pass before the plan model indexes by it.
#include <vector>

#include "refit/core/error.h"
#include "refit/planner/plan.h"
#include "refit/simulator/calls.h"

namespace refit::sim {

// Per transfer, the call that moves it, or -1 when no call does. Refuses, naming the call: a
// transfer index outside the plan or named twice, a relay in an earlier call than the transfer
// it forwards, `after` naming this or a later call, a negative queue, a negative or non-finite
// cost, a copy or collective rank outside the plan's world, a collective of fewer than two
// ranks or with an efficiency outside (0, 1], a call with both transfers and a collective.
[[nodiscard]] Result<std::vector<std::int32_t>> call_of_each_transfer(const Plan& plan,
                                                                      const CallSchedule& schedule);

}  // namespace refit::sim
