#pragma once
// The structural rules of a plan that the NCCL translation indexes by: without them a malformed
// plan (say, from a hand-edited JSON file) would read out of bounds instead of being refused.
// validate() checks far more, against the problem; this needs the plan alone.
#include "refit/core/error.h"
#include "refit/planner/plan.h"

namespace refit::nccl_detail {

// Ids in order, ranks in the world and distinct, segments non-empty and inside their tensor,
// element sizes the copy kernels handle, bytes adding up, and every `via` an earlier transfer
// received by the sender.
Result<void> check_plan_shape(const Plan& plan);

}  // namespace refit::nccl_detail
