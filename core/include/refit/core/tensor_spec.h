#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/core/quantization.h"
#include "refit/core/units.h"

namespace refit {

inline constexpr std::size_t kMaxTensorDims = 8;

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::kBF16;  // what the plan moves (and, but for quantized weights, both sides hold)
  std::optional<Quantization> quantization;  // FP8 in flight: what part of a quantized weight it is

  Bytes bytes() const { return Bytes{element_count(shape) * dtype_size(dtype)}; }
  bool operator==(const TensorSpec&) const = default;
};

// What a rank's buffer of `t` holds, which for FP8 in flight differs from what the plan moves: a
// training rank holds a weight quantized at the senders in its source dtype, and none of its
// scales (the senders make them); nobody holds a weight quantized at its landing ranks, or its
// scales, as a source (the landing ranks make them into their destination buffers).
bool held_at_source(const TensorSpec& t);
DType held_dtype(const TensorSpec& t, bool source);

// Per tensor quantized at the senders, the other half of its weight: a weight's scales tensor, a
// scales tensor's weight (by index into `tensors`); -1 for all other tensors (unquantized,
// quantized at the receivers, whose scales never travel, or trained in fp8, which nobody quantizes).
std::vector<std::int32_t> quantization_partners(std::span<const TensorSpec> tensors);

// A weight quantized at its landing ranks: its fp8 values, its scales and its landing copy
// (indices into a list of tensors).
struct LandingWeight {
  std::uint32_t values = 0;
  std::uint32_t scales = 0;
  std::uint32_t copy = 0;
};
// Every such weight whose three tensors are all in `tensors`, in the order of their copies.
std::vector<LandingWeight> landing_weights(std::span<const TensorSpec> tensors);

// Checks 1..8 dims, non-negative sizes, a non-empty name.
[[nodiscard]] Result<TensorSpec> make_tensor_spec(std::string name, Shape shape, DType dtype);

}  // namespace refit
