#pragma once
// The FP8 formats refit quantizes weights into (quantization.h has their names, dtypes and block
// geometry). Its own header, free of other refit headers and of C++23, because the CUDA kernels
// (compiled as C++20) and the host share it.
#include <array>
#include <cstddef>
#include <cstdint>

namespace refit {

enum class QuantScheme : std::uint8_t {
  kFp8Block128,  // fp8_e4m3 values, one fp32 scale per 128x128 block of the last two dims
  kMxfp8,        // fp8_e4m3 values, one e8m0 scale per 32 elements along the last dim
};
inline constexpr std::size_t kQuantSchemeCount = 2;  // arrays indexed by QuantScheme

// A value per FP8 format, indexed by QuantScheme.
template <class T>
using PerScheme = std::array<T, kQuantSchemeCount>;

// The value of `values` for `scheme`.
template <class T>
constexpr T& of_scheme(PerScheme<T>& values, QuantScheme scheme) {
  return values[static_cast<std::size_t>(scheme)];
}
template <class T>
constexpr const T& of_scheme(const PerScheme<T>& values, QuantScheme scheme) {
  return values[static_cast<std::size_t>(scheme)];
}

}  // namespace refit
