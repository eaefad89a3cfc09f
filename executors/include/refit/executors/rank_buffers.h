#pragma once
// The caller's buffers against the plan, checked the same way by every executor before anything
// is registered, allocated or sent: each names a tensor of the plan, holds at least its box's
// bytes and is the kind of memory the executor moves; the lowering then checks the boxes against
// the plan (inside their tensor, one per tensor and side) and what the rank must send.
#include "refit/core/error.h"
#include "refit/executors/executor.h"
#include "refit/lowering/rank_program.h"

namespace refit {

// The shards the lowering works with: the buffers' tensors, boxes and regions, in the same order.
// Regions must lie inside the parameter they name.
[[nodiscard]] Result<lowering::RankShards> check_rank_buffers(const Plan& plan, Rank rank,
                                                              const RankBuffers& buffers, MemoryKind memory);

// The memory the lowering's buffer indices of one side name: the parameters when the side has
// them, else each shard's bytes.
std::vector<std::span<std::byte>> side_buffers(const RankBuffers& buffers, bool source);

}  // namespace refit
