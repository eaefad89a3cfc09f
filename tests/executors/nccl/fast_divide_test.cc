// The kernels' division by a divisor fixed at launch (fast_divide.h) against the `/` and `%` it
// replaces: every dividend below 2^32 takes the multiply-and-shift, so the property is checked
// on random dividends and divisors of every magnitude and on the edges (dividends 0, 2^32 - 1,
// multiples of the divisor and their neighbours; divisors 1, powers of two, 2^32 - 1). Beyond
// 2^32 the plain division is taken, and must agree too.
#include "fast_divide.h"

#include <random>
#include <vector>

#include <gtest/gtest.h>

namespace refit::nccl_detail {
namespace {

void expect_divides(std::uint64_t d, std::uint64_t n) {
  const Divider v = make_divider(d);
  ASSERT_EQ(quotient(v, n), n / d) << n << " / " << d;
  if (n <= 0x7FFFFFFFFFFFFFFFu) {
    const auto [q, r] = divide(v, static_cast<std::int64_t>(n));
    ASSERT_EQ(q, static_cast<std::int64_t>(n / d)) << n << " / " << d;
    ASSERT_EQ(r, static_cast<std::int64_t>(n % d)) << n << " % " << d;
  }
}

TEST(FastDivide, AgreesWithDivisionOnTheEdges) {
  std::vector<std::uint64_t> divisors{1, 2, 3, 5, 7, 10, 127, 128, 129, 1000, 65535, 65536, 65537};
  for (int s = 17; s <= 32; ++s) {
    divisors.push_back((std::uint64_t{1} << s) - 1);
    if (s < 32) divisors.push_back(std::uint64_t{1} << s);
    divisors.push_back((std::uint64_t{1} << s) + 1);
  }
  divisors.push_back(std::uint64_t{1} << 40);  // beyond 2^32: the plain division
  for (const auto d : divisors)
    for (const std::uint64_t n :
         {std::uint64_t{0}, std::uint64_t{1}, d - 1, d, d + 1, 2 * d - 1, 2 * d, (0xFFFFFFFFu / d) * d,
          (0xFFFFFFFFu / d) * d - 1, std::uint64_t{0xFFFFFFFFu}, std::uint64_t{0x100000000u},
          std::uint64_t{0x7FFFFFFFFFFFFFFFu}})
      expect_divides(d, n);
}

TEST(FastDivide, AgreesWithDivisionOnRandomOperands) {
  std::mt19937_64 rng(32);
  for (int i = 0; i < 2000000; ++i) {
    const int bits = static_cast<int>(rng() % 32) + 1;
    const std::uint64_t d = (rng() >> (64 - bits)) | std::uint64_t{1} << (bits - 1);  // exactly `bits` bits
    const std::uint64_t n = rng() >> (rng() % 64 < 56 ? 32 : rng() % 64);             // mostly below 2^32
    expect_divides(d, n);
  }
}

}  // namespace
}  // namespace refit::nccl_detail
