#pragma once
// What one step of a delta refit moves (delta_executor.h): per transfer of the plan, its pieces'
// payloads back to back, as a plan of its own that any executor runs and the simulator predicts.
// A piece is a segment of a transfer; pieces are numbered in plan order, transfer by transfer.
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/executors/executor.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit {

struct DeltaStep {
  // One byte tensor per transfer of the plan whose payloads are not all empty ("delta payloads of
  // transfer 3"), moved whole by one transfer from the same sender to the same receiver over the
  // same link, with the same chunk.
  Plan plan;
  std::vector<std::int32_t> carries;  // per transfer of `plan`: the transfer of the refit's plan
};

// The step that moves `payloads` (bytes per piece of `plan`, 0 for a piece that sends nothing).
// Refuses a count that is not the plan's pieces, and a negative size.
[[nodiscard]] Result<DeltaStep> delta_step(const Plan& plan, std::span<const std::int64_t> payloads);

// What `rank` hands the executor behind for `step`: each payload tensor it sends (a source) or
// receives (a destination), whole, at `payloads(t)` for transfer t of the refit's plan, in memory
// of `memory`.
[[nodiscard]] RankBuffers delta_step_buffers(const DeltaStep& step, Rank rank, MemoryKind memory,
                                             const std::function<std::byte*(std::int32_t)>& payloads);

// A step as the simulator takes it: its plan and problem, each payload tensor held whole by its
// sender and landing whole at its receiver (nothing to pack or unpack), on the job's GPUs. A
// problem's senders are training ranks, but in a later hop or round (delta_schedule.h) relays
// (inference ranks) send payloads from their own buffers: each such relay sends as a training rank of its own
// on its GPU, numbered after the job's training ranks (the inference ranks renumbered after them), so that it
// shares the GPU's NICs and NVLink with the relay's inference rank. A step that relays do not send keeps the
// job's ranks.
struct StepJob {
  Plan plan;
  ReshardProblem problem;
  PlacedCluster cluster;
};
[[nodiscard]] Result<StepJob> delta_step_job(const DeltaStep& step, const PlacedCluster& cluster);

// The pieces of a plan: the sum of its transfers' segments.
std::int64_t piece_count(const Plan& plan);

}  // namespace refit
