#pragma once
// How many blocks refit's kernels launch at most: enough to fill every multiprocessor of current
// GPUs several times over; more work (boxes' items, tiles) is strided over them.
#include <cstdint>

namespace refit::nccl_detail {

inline constexpr std::int64_t kMaxGridBlocks = 8192;

}  // namespace refit::nccl_detail
