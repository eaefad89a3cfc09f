#pragma once
// A CPU stand-in for the processes of one NCCL run: host memory for every buffer, copy batches run
// through the kernel's own item code (copy_kernel_body.h) and quantization through the quantize
// kernel's (quantize_kernel_body.h), two streams per process ordered only by
// their events, and one NCCL group per step that runs when every process in it has reached it,
// matching each pair's sends and receives in order. A policy decides which stream runs ahead, so
// a missing event wait shows as wrong data, and a group that cannot complete shows as a deadlock.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "program.h"
#include "refit/core/error.h"

namespace refit::nccl_detail::testing {

struct SimProcess {
  const Program* program = nullptr;
  std::vector<std::span<std::byte>> shards;  // by shard index, host memory
  std::int32_t comm_rank = 0;
};

enum class SimPolicy {
  kCopyFirst,  // each copy stream runs as far as its waits allow before any group runs
  kCommFirst,  // groups run as soon as their processes reach them
};

// Errors name what went wrong: unmatched or mismatched sends and receives, or a deadlock; all of
// them faults of the translation (kInternal), as are bytes outside a buffer (check_bounds).
[[nodiscard]] Result<void> simulate(std::span<const SimProcess> processes, SimPolicy policy);

}  // namespace refit::nccl_detail::testing
