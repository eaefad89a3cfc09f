#pragma once
// The deterministic test pattern of `refit run --verify`: element i (global row-major index) of
// tensor t holds the low bytes of mix(t, i), so any misplaced, missing or stale byte shows.
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/tensor_spec.h"

namespace refit {

std::uint64_t pattern_value(std::uint32_t tensor, std::int64_t global_index);

// Fills `out` (the box, row-major, element_size bytes per element) with the pattern.
void fill_pattern(std::uint32_t tensor, const Shape& tensor_shape, const Box& box, std::int64_t element_size,
                  std::span<std::byte> out);

// The pattern of a weight quantized on its way (FP8 in flight), as bf16 bits: finite values of
// either sign between 2^-15 and 2^9 drawn from pattern_value, so every block has a real scale and
// neighbouring elements quantize differently (random bits would put a NaN in nearly every block,
// which makes the whole block NaN and hides misplaced bytes).
void fill_bf16_weight_pattern(std::uint32_t tensor, const Shape& tensor_shape, const Box& box,
                              std::span<std::byte> out);

// What the quantizer makes of a box's bf16 weight pattern (FP8 in flight): the fp8 values and
// the scales every destination of the weight must hold, each row-major over the box (the scales
// over its box of the weight's scales tensor).
struct QuantizedPattern {
  std::vector<std::byte> values;
  std::vector<std::byte> scales;
};
QuantizedPattern quantized_pattern(std::uint32_t tensor, const TensorSpec& weight, const Box& box);

// Whose values each tensor's bytes follow, by tensor: its own index, or for fp8 made at landing
// ranks its landing copy's (the bf16 they are quantized from, which the training ranks hold).
std::vector<std::uint32_t> values_source_of(const ReshardProblem& problem);

// Checks `data` against the pattern; the error names the first wrong element (global index).
[[nodiscard]] Result<void> verify_pattern(std::uint32_t tensor, const Shape& tensor_shape, const Box& box,
                                          std::int64_t element_size, std::span<const std::byte> data);

}  // namespace refit
