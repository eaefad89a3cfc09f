#pragma once
// A seeded stand-in for what RL training does to a model's weights between two refits, for the
// delta codec's tests and benchmarks and for `refit run --delta` (to come): at every step each
// element changes with probability `change_fraction`, by a small random step relative to its
// value, always to a different bit pattern. Every element's fate is a function of (seed, step, its
// global index) alone, so any rank can compute any shard of a tensor at any step, whatever the
// layout: a span is a contiguous run of elements starting at global index `first_element`.
#include <cstdint>
#include <span>

#include "refit/core/dtype.h"
#include "refit/core/error.h"

namespace refit {

struct SyntheticUpdate {
  double change_fraction = 0.01;  // probability in [0, 1] that an element changes at a step
  double relative_step = 0x1p-7;  // a step is uniform in +-relative_step * |value| (2^-7: about one
                                  // bf16 unit in the last place); one that rounds back to the same
                                  // bits flips the lowest bit instead
  std::uint64_t seed = 0;
};

// Initial weights: about N(0, 0.02^2) (the sum of four uniforms), the usual scale of an initialised
// transformer's weights. dtype is bf16 or fp32.
[[nodiscard]] Result<void> fill_synthetic_weights(std::span<std::byte> bytes, DType dtype,
                                                  std::int64_t first_element, std::uint64_t seed);

// Step `step` (>= 1) of `update`, applied in place to weights of `dtype` (bf16 or fp32).
[[nodiscard]] Result<void> apply_synthetic_step(std::span<std::byte> bytes, DType dtype,
                                                std::int64_t first_element, const SyntheticUpdate& update,
                                                std::int64_t step);

}  // namespace refit
