#pragma once
#include <cstdint>
#include <span>
#include <string_view>

#include "refit/core/error.h"

namespace refit {

enum class DType : std::uint8_t {
  kBF16,
  kFP16,
  kFP32,
  kFP64,
  kFP8E4M3,
  kFP8E5M2,
  kInt8,
  kUInt8,
  kInt32,
  kInt64,
  // OCP MX scale: an unsigned biased power of two (2^(bits-127)), 0xFF is NaN; the scale type of
  // mxfp8 (refit/core/quantization.h). Torch calls it float8_e8m0fnu.
  kFP8E8M0,
};

std::int64_t dtype_size(DType t);
// Canonical short names: bf16, fp16, fp32, fp64, fp8_e4m3, fp8_e5m2, int8, uint8, int32, int64,
// fp8_e8m0.
std::string_view dtype_name(DType t);
// Accepts the canonical names and the torch spellings (bfloat16, float16, float32, float, ...).
[[nodiscard]] Result<DType> parse_dtype(std::string_view name);
std::span<const DType> all_dtypes();

}  // namespace refit
