#pragma once
// Every byte a program reads or writes lies inside its buffer: checked once before anything runs,
// so a translation fault shows as an error naming the op instead of as corrupted GPU memory.
#include <cstdint>
#include <span>

#include "program.h"
#include "refit/core/error.h"

namespace refit::nccl_detail {

// shard_bytes[i] is the size of shard buffer i; staging and scratch sizes come from the program.
// A byte outside is a fault of the translation (the buffers were checked against the plan before
// it): kInternal, naming the op.
[[nodiscard]] Result<void> check_bounds(const Program& program, std::span<const std::int64_t> shard_bytes);

}  // namespace refit::nccl_detail
