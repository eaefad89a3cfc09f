#pragma once
// Element-by-element references over boxes: how often each element of a tensor is covered.
#include <cstdint>
#include <vector>

#include "refit/core/box.h"

namespace refit::testing {

// Adds one to counts[e] for every element e of `box`, a tensor of `shape` numbered row-major.
inline void count_elements(const Shape& shape, const Box& box, std::vector<int>& counts) {
  if (box.empty()) return;
  const auto strides = row_major_strides(shape);
  Shape at(box.rank(), 0);
  for (std::int64_t n = 0; n < box.volume(); ++n) {
    std::int64_t flat = 0;
    for (std::size_t d = 0; d < box.rank(); ++d) flat += (box.offset[d] + at[d]) * strides[d];
    ++counts[static_cast<std::size_t>(flat)];
    for (std::size_t d = box.rank(); d-- > 0;) {
      if (++at[d] < box.extent[d]) break;
      at[d] = 0;
    }
  }
}

}  // namespace refit::testing
