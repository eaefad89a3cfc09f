#pragma once
// The FP8 formats refit quantises weights into (quantization.h has their names, dtypes and block
// geometry). Its own header, free of other refit headers and of C++23, because the CUDA kernels
// (compiled as C++20) and the host share it.
#include <cstddef>
#include <cstdint>

namespace refit {

enum class QuantScheme : std::uint8_t {
  kFp8Block128,  // fp8_e4m3 values, one fp32 scale per 128x128 block of the last two dims
  kMxfp8,        // fp8_e4m3 values, one e8m0 scale per 32 elements along the last dim
};
inline constexpr std::size_t kQuantSchemeCount = 2;  // arrays indexed by QuantScheme

}  // namespace refit
