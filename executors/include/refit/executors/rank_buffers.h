#pragma once
// The caller's buffers against the plan, checked the same way by every executor before anything
// is registered, allocated or sent: each names a tensor of the plan, holds at least its box's
// bytes and is the kind of memory the executor moves; the lowering then checks the boxes against
// the plan (inside their tensor, one per tensor and side) and what the rank must send.
#include "refit/core/error.h"
#include "refit/executors/executor.h"
#include "refit/lowering/rank_program.h"

namespace refit {

// The shards the lowering works with: the buffers' tensors and boxes, in the same order.
[[nodiscard]] Result<lowering::RankShards> check_rank_buffers(const Plan& plan, Rank rank,
                                                              const RankBuffers& buffers, MemoryKind memory);

}  // namespace refit
