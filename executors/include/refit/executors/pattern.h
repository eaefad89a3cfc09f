#pragma once
// The deterministic test pattern of `refit run --verify`: element i (global row-major index) of
// tensor t holds the low bytes of mix(t, i), so any misplaced, missing or stale byte shows.
#include <cstddef>
#include <cstdint>
#include <span>

#include "refit/core/box.h"
#include "refit/core/error.h"

namespace refit {

std::uint64_t pattern_value(std::uint32_t tensor, std::int64_t global_index);

// Fills `out` (the box, row-major, element_size bytes per element) with the pattern.
void fill_pattern(std::uint32_t tensor, const Shape& tensor_shape, const Box& box, std::int64_t element_size,
                  std::span<std::byte> out);

// Checks `data` against the pattern; the error names the first wrong element (global index).
[[nodiscard]] Result<void> verify_pattern(std::uint32_t tensor, const Shape& tensor_shape, const Box& box,
                                          std::int64_t element_size, std::span<const std::byte> data);

}  // namespace refit
