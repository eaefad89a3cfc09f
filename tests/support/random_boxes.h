#pragma once
// Random boxes for property tests of box arithmetic: boxes of a few dims, and boxes inside others.
#include <cstdint>
#include <random>

#include "refit/core/box.h"

namespace refit::testing {

class RandomBoxes {
 public:
  explicit RandomBoxes(std::uint64_t seed) : rng_(seed) {}
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }
  // A box inside `outer`.
  Box inside(const Box& outer) {
    Box b = outer;
    for (std::size_t d = 0; d < b.rank(); ++d) {
      b.extent[d] = uniform(1, outer.extent[d]);
      b.offset[d] = outer.offset[d] + uniform(0, outer.extent[d] - b.extent[d]);
    }
    return b;
  }
  // A box of `dims` dims, offsets 0-3 and extents 1..max_extent.
  Box box(std::size_t dims, std::int64_t max_extent) {
    Box b{Shape(dims), Shape(dims)};
    for (std::size_t d = 0; d < dims; ++d) {
      b.offset[d] = uniform(0, 3);
      b.extent[d] = uniform(1, max_extent);
    }
    return b;
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace refit::testing
