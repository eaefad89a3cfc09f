#pragma once
// When a delta refit re-plans by the bytes that move (DeltaRebalance in delta_executor.h): each
// tensor's payload as one step measured it, and how far the step's payload shares over the tensors
// lie from those its plan was balanced for. Pure functions of data every rank agrees on, so every
// rank decides alike.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/units.h"
#include "refit/planner/plan.h"

namespace refit::delta_rebalance {

// By tensor of the plan: its dense bytes, what a plan without deltas weighs it by; 0 for a tensor
// none of whose pieces leaves a rank (fp8 that landing ranks make and forward nowhere).
std::vector<Bytes> dense_bytes(const Plan& plan);

// By tensor of the plan: the bytes a step like this one moves for one whole copy of the tensor
// (PlanOptions::moved_bytes), from the pieces this step encoded against a baseline both ends agreed
// on: their payloads over their dense bytes, times the tensor's dense bytes. A piece sent dense for
// want of such a baseline (the first step, a piece whose sender changed) says nothing about the
// tensor's delta; a tensor with no other piece keeps its `planned` bytes. A tensor none of whose
// pieces leaves a rank (fp8 made by landing ranks' quantize steps and forwarded nowhere) moves
// nothing: 0. `payloads` and `dense` are by piece of the plan (delta_step.h numbers them).
std::vector<Bytes> measured_moved_bytes(const Plan& plan, std::span<const std::int64_t> payloads,
                                        const std::vector<bool>& dense, std::span<const Bytes> planned);

// The total-variation distance between the tensors' shares of `planned` and of `measured`:
// 1/2 sum_t |measured_t / M - planned_t / P|, in [0, 1]: the share of the payload that sits in
// tensors the plan weighed differently. Shares, not bytes: a change fraction that moves every
// tensor alike leaves a balance by bytes as it was. 0 when `measured` moves nothing (there is
// nothing to balance); 1 when only `planned` does.
double share_drift(std::span<const Bytes> planned, std::span<const Bytes> measured);

// The most bytes any rank of `plan` sends when tensor t moves moved[t] bytes per whole copy:
// each segment weighs its share of its tensor's moved bytes (a landing rank's quantize step sends
// nothing). What a plan balanced by `moved` makes as small as it can; comparing two plans by it
// says whether re-preparing is worth a dense step.
Bytes busiest_sender(const Plan& plan, std::span<const Bytes> moved);

}  // namespace refit::delta_rebalance
