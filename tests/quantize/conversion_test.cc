// fp8_rules.h, the arithmetic the CPU quantizer and the CUDA kernel share, against brute force.
#include "refit/quantize/fp8_rules.h"

#include <bit>
#include <cmath>
#include <limits>
#include <vector>

#include <gtest/gtest.h>

#include "vectors.h"

namespace refit {
namespace {

using testing::e4m3_value;

// Brute force: the e4m3fn code nearest to x (ties to the even code, i.e. an even mantissa),
// saturating at +-448, NaN as 0x7F. Searches all 254 finite codes.
std::uint8_t nearest_e4m3(float x) {
  if (std::isnan(x)) return fp8::kE4m3Nan;
  const double target = std::fmin(std::fabs(static_cast<double>(x)), 448.0);
  int best = 0;
  for (int code = 1; code <= 0x7E; ++code) {
    const double d = std::fabs(e4m3_value(static_cast<std::uint8_t>(code)) - target);
    const double best_d = std::fabs(e4m3_value(static_cast<std::uint8_t>(best)) - target);
    if (d < best_d || (d == best_d && code % 2 == 0)) best = code;
  }
  return static_cast<std::uint8_t>(best | (std::signbit(x) ? 0x80 : 0));
}

float from_bits(std::uint32_t bits) { return std::bit_cast<float>(bits); }

TEST(Fp8Conversion, EveryBf16ValueRoundsToTheNearestE4m3) {
  // All 65536 bf16 bit patterns: zeros, bf16 subnormals, every binade, +-Inf (saturate to
  // +-448) and NaNs (0x7F).
  for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
    const float x = from_bits(bits << 16);
    ASSERT_EQ(fp8::fp32_to_e4m3(x), nearest_e4m3(x)) << "bf16 bits " << bits;
  }
}

TEST(Fp8Conversion, TiesGoToEvenAndNeighboursOfTiesDoNot) {
  // Between consecutive e4m3 magnitudes a < b (subnormals included): the midpoint is a tie that
  // goes to the even code; one fp32 ulp either side goes to the nearer one.
  int ties = 0;
  for (int code = 0; code < 0x7E; ++code) {
    const auto a = static_cast<float>(e4m3_value(static_cast<std::uint8_t>(code)));
    const auto b = static_cast<float>(e4m3_value(static_cast<std::uint8_t>(code + 1)));
    const float mid = (a + b) / 2;  // exact: e4m3 values have 4 significant bits
    for (float sign : {1.0f, -1.0f}) {
      const std::uint8_t neg = sign < 0 ? 0x80 : 0;
      EXPECT_EQ(fp8::fp32_to_e4m3(sign * mid), (code % 2 == 0 ? code : code + 1) | neg) << mid;
      EXPECT_EQ(fp8::fp32_to_e4m3(sign * std::nextafter(mid, 0.0f)), code | neg) << mid;
      EXPECT_EQ(fp8::fp32_to_e4m3(sign * std::nextafter(mid, 1e9f)), (code + 1) | neg) << mid;
      ++ties;
    }
  }
  EXPECT_EQ(ties, 2 * 126);
  // Past the largest finite value: 464 ties to 448 (even); beyond, e4m3fn saturates.
  EXPECT_EQ(fp8::fp32_to_e4m3(464.0f), 0x7E);
  EXPECT_EQ(fp8::fp32_to_e4m3(465.0f), 0x7E);
  EXPECT_EQ(fp8::fp32_to_e4m3(-1e30f), 0xFE);
  EXPECT_EQ(fp8::fp32_to_e4m3(-std::numeric_limits<float>::quiet_NaN()), 0x7F);  // sign dropped
}

TEST(Fp8Rules, Block128ScaleFollowsVllm) {
  // amax 448: scale_inv = 448 / 448 = 1 and multiplier 1 / 1 = 1.
  auto s = fp8::block128_scale(0x43E0);  // bf16 448
  EXPECT_EQ(s.multiplier, 1.0f);
  EXPECT_EQ(s.scale_bits, std::bit_cast<std::uint32_t>(1.0f));
  // All zero: amax clamped to 1e-4, scale_inv = fp32(1e-4) / 448, multiplier its fp32 reciprocal.
  s = fp8::block128_scale(0);
  EXPECT_EQ(s.scale_bits, std::bit_cast<std::uint32_t>(1e-4f / 448.0f));
  EXPECT_EQ(s.multiplier, 1.0f / (1e-4f / 448.0f));
  // Inf: scale_inv +Inf, multiplier 1 / Inf = 0. NaN: a NaN scale (canonical) and multiplier.
  s = fp8::block128_scale(fp8::kBf16Inf);
  EXPECT_EQ(s.scale_bits, 0x7F800000u);
  EXPECT_EQ(s.multiplier, 0.0f);
  s = fp8::block128_scale(0x7FC1);
  EXPECT_EQ(s.scale_bits, fp8::kFp32Nan);
  EXPECT_TRUE(std::isnan(s.multiplier));
}

TEST(Fp8Rules, MxScaleIsTheLargestPowerOfTwoBelowAmaxOver256) {
  // For every finite bf16 amax > 0: scale 2^e with e = floor(log2(amax)) - 8 (8 = e4m3's largest
  // exponent, so amax / 2^e lies in [256, 512)), clamped below to e8m0's 2^-127; the byte is
  // e + 127 and the multiplier exactly 2^-e.
  for (std::uint32_t bits = 1; bits < fp8::kBf16Inf; ++bits) {
    const double amax = std::bit_cast<float>(bits << 16);
    const int e = std::max(std::ilogb(amax) - 8, -127);
    const auto s = fp8::mxfp8_scale(static_cast<std::uint16_t>(bits));
    ASSERT_EQ(s.scale_bits, static_cast<std::uint32_t>(e + 127)) << amax;
    ASSERT_EQ(s.multiplier, std::ldexp(1.0f, -e)) << amax;
  }
  EXPECT_EQ(fp8::mxfp8_scale(0).scale_bits, 0u);  // an all-zero block: 2^-127
  EXPECT_EQ(fp8::mxfp8_scale(fp8::kBf16Inf).scale_bits, fp8::kE8m0Nan);
  EXPECT_EQ(fp8::mxfp8_scale(0x7FFF).scale_bits, fp8::kE8m0Nan);
  EXPECT_TRUE(std::isnan(fp8::mxfp8_scale(fp8::kBf16Inf).multiplier));
}

}  // namespace
}  // namespace refit
