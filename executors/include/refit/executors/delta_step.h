#pragma once
// What one step of a delta refit moves (delta_executor.h): per transfer of the plan, its pieces'
// payloads back to back, as a plan of its own that any executor runs and the simulator predicts.
// A piece is a segment of a transfer; pieces are numbered in plan order, transfer by transfer.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/planner/plan.h"

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

// The problem of a step's plan, for the simulator: each payload tensor held whole by its sender
// and landing whole at its receiver (nothing to pack or unpack).
[[nodiscard]] Result<ReshardProblem> delta_step_problem(const DeltaStep& step);

// What a delta refit cannot do yet, named: weights trained in fp8 (kUnsupported naming the first).
// FP8 quantised at the senders (DeltaExecutor quantises, then encodes the fp8 it sends), at the
// landing ranks (their quantise steps run between rounds) and at the receivers (bf16 moves) are
// taken.
[[nodiscard]] Result<void> check_delta_plan(const Plan& plan);

// The pieces of a plan: the sum of its transfers' segments.
std::int64_t piece_count(const Plan& plan);

}  // namespace refit
