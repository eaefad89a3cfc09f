#pragma once
// Boxes stored row-major in buffers: the offsets, contiguous runs and copy geometries the
// translation needs. Element ranges are always row-major indices inside a box.
#include <cstdint>
#include <optional>
#include <vector>

#include "device_copy.h"
#include "refit/core/box.h"

namespace refit::nccl_detail {

// A row-major array holding `box`, its first element `offset` bytes into some buffer.
struct Stored {
  std::int64_t offset = 0;
  Box box;
};

// Row-major index of `point` inside `box`.
std::int64_t row_major_index(const Box& box, const Shape& point);

// Boxes (at most 2 * dims - 1) that cover exactly elements [first, end) of `box`.
void range_boxes(const Box& box, std::int64_t first, std::int64_t end, std::vector<Box>& out);

struct PlannedCopy {
  std::int64_t src_offset = 0;  // bytes into each buffer of the first element of `x`
  std::int64_t dst_offset = 0;
  CopyGeometry geometry;
};
// Copies elements [first, first + count) of box `x` (inside both arrays) from `src` to `dst`.
PlannedCopy plan_copy(const Stored& src, const Stored& dst, const Box& x, std::int64_t first,
                      std::int64_t count, std::int64_t element_size);

// Where elements [first, first + count) of `x` lie in `array` when they are one contiguous run:
// the byte offset of the run in the buffer; nothing when they are spread out.
std::optional<std::int64_t> contiguous_run(const Stored& array, const Box& x, std::int64_t first,
                                           std::int64_t count, std::int64_t element_size);

inline constexpr std::int64_t kAlign = 16;
constexpr std::int64_t align_up(std::int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

}  // namespace refit::nccl_detail
