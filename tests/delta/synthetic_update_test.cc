// The synthetic RL-like update (refit/delta/synthetic_update.h): seeded and layout-free, changes
// about the fraction asked for, always to new bits, by small steps.
#include "refit/delta/synthetic_update.h"

#include <bit>
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "chunk_data.h"
#include "error_code.h"

namespace refit {
namespace {

using testing::ByteVector;
using testing::error_code;

float bf16_value(const ByteVector& b, std::size_t i) {
  std::uint16_t bits;
  std::memcpy(&bits, b.data() + 2 * i, 2);
  return std::bit_cast<float>(static_cast<std::uint32_t>(bits) << 16);
}

ByteVector weights(DType dtype, std::int64_t elements, std::int64_t first = 0) {
  ByteVector out(elements * dtype_size(dtype));
  EXPECT_TRUE(fill_synthetic_weights(out, dtype, first, 1));
  return out;
}

TEST(SyntheticUpdate, IsTheSameWhateverTheSpansItIsComputedIn) {
  // Elements [0, 1000) in one span equal [0, 377) and [377, 1000) computed apart: each element's
  // value depends on (seed, step, global index) only.
  for (const DType dtype : {DType::kBF16, DType::kFP32}) {
    ByteVector whole = weights(dtype, 1000);
    ByteVector head = weights(dtype, 377);
    ByteVector tail = weights(dtype, 623, 377);
    const SyntheticUpdate u{.change_fraction = 0.3, .seed = 9};
    for (std::int64_t step = 1; step <= 3; ++step) {
      ASSERT_TRUE(apply_synthetic_step(whole, dtype, 0, u, step));
      ASSERT_TRUE(apply_synthetic_step(head, dtype, 0, u, step));
      ASSERT_TRUE(apply_synthetic_step(tail, dtype, 377, u, step));
    }
    head.insert(head.end(), tail.begin(), tail.end());
    EXPECT_TRUE(head == whole) << dtype_name(dtype);
  }
}

TEST(SyntheticUpdate, ChangesAboutTheFractionAskedFor) {
  // Each of n = 1,000,000 elements changes with probability f: the count is binomial, mean n f,
  // standard deviation sqrt(n f (1 - f)); allow 5 of them. f = 1 changes every element.
  const std::int64_t n = 1'000'000;
  for (const double f : {0.001, 0.01, 0.3, 1.0}) {
    const ByteVector before = weights(DType::kBF16, n);
    ByteVector after = before;
    ASSERT_TRUE(apply_synthetic_step(after, DType::kBF16, 0, {.change_fraction = f, .seed = 2}, 1));
    const std::int64_t changed =
        testing::changed_elements({.dtype = DType::kBF16, .baseline = before, .current = after});
    const double sigma = std::sqrt(n * f * (1 - f));
    EXPECT_NEAR(static_cast<double>(changed), n * f, 5 * sigma + 0.5) << "f = " << f;
  }
}

TEST(SyntheticUpdate, StepsAreSmall) {
  // |x' - x| <= 2^-7 |x| (the step) plus at most one bf16 unit in the last place (the rounding,
  // or the flip of the lowest bit when the step rounds back), 2^-7 |x|: within 2^-6 |x|.
  const std::int64_t n = 100000;
  const ByteVector before = weights(DType::kBF16, n);
  ByteVector after = before;
  ASSERT_TRUE(apply_synthetic_step(after, DType::kBF16, 0, {.change_fraction = 1.0}, 1));
  for (std::int64_t i = 0; i < n; ++i) {
    const float x = bf16_value(before, i);
    if (std::fabs(x) < 1e-30f) continue;  // zeros and denormals move by one unit, not relatively
    ASSERT_LE(std::fabs(bf16_value(after, i) - x), 0x1p-6f * std::fabs(x)) << "element " << i;
  }
}

TEST(SyntheticUpdate, InitialWeightsHaveTheUsualScale) {
  // Mean 0, standard deviation 0.02, over 1,000,000 fp32 elements (within 1 %).
  const std::int64_t n = 1'000'000;
  const ByteVector w = weights(DType::kFP32, n);
  double sum = 0, squares = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    float x;
    std::memcpy(&x, w.data() + 4 * i, 4);
    sum += x;
    squares += static_cast<double>(x) * x;
  }
  EXPECT_NEAR(sum / n, 0.0, 1e-4);
  EXPECT_NEAR(std::sqrt(squares / n), 0.02, 0.0002);
}

TEST(SyntheticUpdate, RefusesWhatItCannotDo) {
  ByteVector b(8);
  EXPECT_EQ(error_code(fill_synthetic_weights(b, DType::kFP16, 0, 1)), ErrorCode::kUnsupported);
  EXPECT_EQ(error_code(apply_synthetic_step(b, DType::kBF16, 0, {.change_fraction = 1.5}, 1)),
            ErrorCode::kOutOfRange);
  EXPECT_EQ(error_code(apply_synthetic_step(b, DType::kBF16, 0, {.relative_step = NAN}, 1)),
            ErrorCode::kOutOfRange);
  EXPECT_EQ(error_code(apply_synthetic_step(b, DType::kBF16, 0, {}, 0)), ErrorCode::kOutOfRange);
  EXPECT_EQ(error_code(apply_synthetic_step(b, DType::kFP32, -1, {}, 1)), ErrorCode::kInvalidArgument);
  ByteVector odd(7);
  EXPECT_EQ(error_code(fill_synthetic_weights(odd, DType::kBF16, 0, 1)), ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace refit
