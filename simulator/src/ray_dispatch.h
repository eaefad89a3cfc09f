#pragma once
// NeMo RL's Ray fan-out per refit (docs/deployed_refit.md, A1 and A2, "Ray dispatch"): the
// driver's `sync_weights` calls one method on every training worker and on every vLLM worker
// that leads a TP group (`run_all_workers_single_data`, `run_rank_0_only_axes` = tensor and
// pipeline parallel), then `ray.get`s both lists. No rank moves a byte before the last worker
// has its call, so the driver's W submissions and one round trip are on the critical path.
#include <cstdint>

#include "refit/core/problem.h"
#include "refit/simulator/calls.h"
#include "refit/simulator/deployment.h"

namespace refit::sim {

// The actors the driver calls: every training rank, and one per vLLM TP group of the inference
// ranks. A TP group is as large as the most ways a tensor other than a routed expert is split
// over the inference ranks (routed experts split over the whole engine).
std::int32_t ray_actors(const ReshardProblem& problem);

// One driver's fan-out to `actors` actors: each submission, then one round trip for the results.
Seconds ray_dispatch_time(const DeploymentConstants& constants, std::int32_t actors);

// Puts the fan-out before every call of `schedule`: as its first call, on a queue of its own,
// the first call of every other queue after it.
void add_ray_dispatch(const ReshardProblem& problem, const DeploymentConstants& constants,
                      CallSchedule& schedule);

}  // namespace refit::sim
