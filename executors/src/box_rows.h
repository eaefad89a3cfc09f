#pragma once
// Row-major boxes a row at a time: the delta refit packs a piece of a shard into a contiguous
// chunk (the codec's unit) and back, and steps synthetic weights a row of global indices at a time.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>

#include "refit/core/box.h"

namespace refit::box_rows {

// Calls f(point) with the first element of every row (the last dimension's run) of a non-empty
// `box`, in row-major order.
template <class F>
void for_each_row(const Box& box, F&& f) {
  if (box.empty()) return;
  Shape point = box.offset;
  const std::size_t dims = box.rank();
  while (true) {
    f(static_cast<const Shape&>(point));
    std::size_t d = dims - 1;
    while (true) {
      if (d == 0) return;
      --d;
      if (++point[d] < box.offset[d] + box.extent[d]) break;
      point[d] = box.offset[d];
    }
  }
}

// The row-major index of `point` (global coordinates) in an array of `extent` starting at `offset`.
inline std::int64_t flat_index(const Shape& offset, const Shape& extent, const Shape& point) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d < extent.size(); ++d) index = index * extent[d] + (point[d] - offset[d]);
  return index;
}

// Calls f(byte offset in `outer`, byte offset in `inner` packed, row bytes) for every row of
// `inner`, a box inside `outer`; both are row-major arrays of `element_bytes`-long elements.
template <class F>
void for_each_row_bytes(const Box& outer, const Box& inner, std::int64_t element_bytes, F&& f) {
  const auto row_bytes = static_cast<std::size_t>(inner.extent.back() * element_bytes);
  std::size_t at = 0;
  for_each_row(inner, [&](const Shape& point) {
    f(static_cast<std::size_t>(flat_index(outer.offset, outer.extent, point) * element_bytes), at, row_bytes);
    at += row_bytes;
  });
}

// Copies `inner` out of `outer_bytes` into `packed` (its elements back to back), and back.
inline void pack_box(const Box& outer, std::span<const std::byte> outer_bytes, const Box& inner,
                     std::int64_t element_bytes, std::span<std::byte> packed) {
  for_each_row_bytes(outer, inner, element_bytes, [&](std::size_t place, std::size_t at, std::size_t n) {
    std::memcpy(packed.data() + at, outer_bytes.data() + place, n);
  });
}
inline void unpack_box(const Box& outer, std::span<std::byte> outer_bytes, const Box& inner,
                       std::int64_t element_bytes, std::span<const std::byte> packed) {
  for_each_row_bytes(outer, inner, element_bytes, [&](std::size_t place, std::size_t at, std::size_t n) {
    std::memcpy(outer_bytes.data() + place, packed.data() + at, n);
  });
}

}  // namespace refit::box_rows
