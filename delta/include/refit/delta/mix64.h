#pragma once
// The 64-bit mixing function of the delta module: a bijection of 64-bit words whose output bits
// each depend on every input bit (MurmurHash3's 64-bit finalizer: shifts by 33, multipliers
// 0xff51afd7ed558ccd and 0xc4ceb9fe1a85ec53; docs/delta.md). The chunk checksum (checksum.h) and
// the synthetic update (synthetic_update.h) are built on it. C++20 and no refit headers, so that
// nvcc compiles it for the GPU codec (executors/nccl/src/delta_kernel_body.h).
#include <cstdint>

#include "refit/delta/device_compatible.h"

namespace refit::delta {

REFIT_DELTA_HD inline constexpr std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdull;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ull;
  x ^= x >> 33;
  return x;
}

// The golden ratio's 64-bit fraction: odd, so that i * kGolden visits every 64-bit value.
inline constexpr std::uint64_t kGolden = 0x9e3779b97f4a7c15ull;

}  // namespace refit::delta
