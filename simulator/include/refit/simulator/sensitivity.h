#pragma once
// How a deployed prediction moves when each constant it rests on moves: the hardware's
// bandwidths and latencies and every DeploymentConstants figure, one at a time, scaled down and
// up by the same step. Reads as "this prediction is only as good as that constant".
#include <string>
#include <vector>

#include "refit/simulator/deployment.h"
#include "refit/simulator/plan_simulation.h"

namespace refit {

struct Sensitivity {
  std::string constant;  // e.g. "NIC bandwidth", "kernel launch"
  Seconds lower;         // predicted with the constant x (1 - step)
  Seconds higher;        // predicted with the constant x (1 + step); efficiencies capped at 1
};

// Simulates `plan` as `deployment` runs it once per constant and direction (the plan itself is
// not re-made); `options` as for simulate_plan, its `calls` ignored. Step in (0, 1).
[[nodiscard]] Result<std::vector<Sensitivity>> sensitivity(const Plan& plan, const ReshardProblem& problem,
                                                           const PlacedCluster& cluster,
                                                           const DeploymentInfo& deployment,
                                                           const PlanSimulationOptions& options,
                                                           double step = 0.2);

}  // namespace refit
