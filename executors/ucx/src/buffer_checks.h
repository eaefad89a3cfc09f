#pragma once
// The caller's buffers against the plan, before anything is registered: each names a tensor of
// the plan, a box inside it, and holds at least the box's bytes; a rank has at most one source
// and one destination buffer per tensor.
#include <cstdint>
#include <optional>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/executor.h"
#include "refit/planner/plan.h"

namespace refit::ucx_detail {

Result<void> check_buffers(const Plan& plan, Rank rank, const RankBuffers& buffers);

// Index of the buffer of `tensor` in `shards`, if there is one.
std::optional<std::size_t> buffer_of(const std::vector<ShardBuffer>& shards, std::uint32_t tensor);

}  // namespace refit::ucx_detail
