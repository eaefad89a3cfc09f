#pragma once
// Division by a number fixed before a kernel starts, as one multiply-high, an add and a shift:
// the kernels split flat indices into coordinates per tile and per row, and a GPU has no integer
// divide instruction (a 64-bit `/` is a long software routine). Written once for both compilers,
// so the CPU tests check it against `/`. C++20, no refit headers.
//
// The round-up method of Granlund and Montgomery ("Division by invariant integers using
// multiplication", PLDI 1994): for a divisor 1 <= d < 2^32, s = ceil(log2 d) and
// m = floor(2^32 (2^s - d) / d) + 1 < 2^32 give n / d = (mulhi(n, m) + n) >> s for every
// n < 2^32 (the error of the scaled reciprocal, below d / 2^(32+s) per unit of n, never moves a
// quotient across an integer there). Larger dividends or divisors take the plain division.
#include <cstdint>

#include "host_device.h"

namespace refit::nccl_detail {

struct Divider {
  std::uint64_t divisor = 1;
  std::uint32_t multiplier = 0;
  std::uint32_t shift = 0;
  bool fast = true;  // divisor < 2^32: the multiply serves dividends below 2^32
};

// `divisor` >= 1 (0 is taken as 1: the kernels never divide by an empty extent's 0).
inline Divider make_divider(std::uint64_t divisor) {
  Divider v;
  v.divisor = divisor == 0 ? 1 : divisor;
  v.fast = v.divisor <= 0xFFFFFFFFu;
  if (!v.fast) return v;
  while ((std::uint64_t{1} << v.shift) < v.divisor) ++v.shift;
  const std::uint64_t excess = (std::uint64_t{1} << v.shift) - v.divisor;  // < divisor
  v.multiplier = static_cast<std::uint32_t>((excess << 32) / v.divisor + 1);
  return v;
}

REFIT_HOST_DEVICE std::uint32_t multiply_high(std::uint32_t a, std::uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<std::uint32_t>((std::uint64_t{a} * b) >> 32);
#endif
}

// n / divisor for n < 2^32 and a fast divider (the caller knows both).
REFIT_HOST_DEVICE std::uint32_t quotient_32(const Divider& v, std::uint32_t n) {
  return static_cast<std::uint32_t>((std::uint64_t{multiply_high(n, v.multiplier)} + n) >> v.shift);
}

REFIT_HOST_DEVICE std::uint64_t quotient(const Divider& v, std::uint64_t n) {
  if (v.fast && n <= 0xFFFFFFFFu) return quotient_32(v, static_cast<std::uint32_t>(n));
  return n / v.divisor;
}

// n = quotient * divisor + remainder, for signed indices that are never negative.
struct QuotientRemainder {
  std::int64_t quotient = 0;
  std::int64_t remainder = 0;
};
REFIT_HOST_DEVICE QuotientRemainder divide(const Divider& v, std::int64_t n) {
  const auto q = static_cast<std::int64_t>(quotient(v, static_cast<std::uint64_t>(n)));
  return {q, n - q * static_cast<std::int64_t>(v.divisor)};
}

}  // namespace refit::nccl_detail
