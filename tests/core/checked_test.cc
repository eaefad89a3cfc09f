// Checked arithmetic on sizes (checked.h) and UTF-8 validation (utf8.h).
#include "refit/core/checked.h"

#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/core/utf8.h"

namespace refit {
namespace {

using testing::error_code;
using ::testing::HasSubstr;

constexpr std::int64_t kMax = INT64_MAX;

TEST(Checked, AddAndMulReportOverflowInsteadOfWrapping) {
  EXPECT_EQ(checked_add(kMax - 1, 1), kMax);
  EXPECT_EQ(checked_add(kMax, 1), std::nullopt);
  EXPECT_EQ(checked_mul(std::int64_t{1} << 31, std::int64_t{1} << 31), std::int64_t{1} << 62);
  // 2^32 x 2^31 = 2^63 is one past INT64_MAX.
  EXPECT_EQ(checked_mul(std::int64_t{1} << 32, std::int64_t{1} << 31), std::nullopt);
  EXPECT_EQ(checked_mul(kMax, -1), -kMax);
}

TEST(Checked, CeilDivDoesNotOverflowNearTheTop) {
  // ceil(L/n) as (L + n - 1) / n overflows for L near INT64_MAX; L/n + (L%n != 0) does not.
  EXPECT_EQ(ceil_div(10, 4), 3);
  EXPECT_EQ(ceil_div(8, 4), 2);
  EXPECT_EQ(ceil_div(0, 4), 0);
  EXPECT_EQ(ceil_div(kMax, 2), std::int64_t{1} << 62);  // (2^63 - 1) / 2 rounded up
  EXPECT_EQ(ceil_div(kMax, kMax), 1);
}

TEST(Checked, ProductStopsAtTheLimitAndSaysWhat) {
  const std::vector<std::int64_t> fine{1024, 1024};
  EXPECT_EQ(checked_product(fine, 1 << 20, "mesh positions"), 1 << 20);
  const std::vector<std::int64_t> big{1024, 1025};
  const auto r = checked_product(big, 1 << 20, "mesh positions");
  EXPECT_EQ(error_code(r), ErrorCode::kOutOfRange);
  EXPECT_THAT(r.error().message, HasSubstr("mesh positions: product of sizes exceeds 1048576"));
  // A product that would wrap to a small or negative number is refused too.
  const std::vector<std::int64_t> wraps{std::int64_t{1} << 32, std::int64_t{1} << 32, 0};
  EXPECT_EQ(error_code(checked_product(wraps, kMax, "elements")), ErrorCode::kOutOfRange);
  // A zero size gives zero elements, whatever the others (an empty tensor).
  const std::vector<std::int64_t> empty{0, kMax};
  EXPECT_EQ(checked_product(empty, 10, "elements"), 0);
}

TEST(Checked, ResultFormsNameWhatOverflowed) {
  EXPECT_EQ(checked_mul(3, 4, 12, "bytes"), 12);
  EXPECT_THAT(checked_mul(3, 5, 12, "bytes").error().message, HasSubstr("bytes: 3 x 5 exceeds 12"));
  EXPECT_THAT(checked_add(kMax, 1, kMax, "total").error().message, HasSubstr("total:"));
}

TEST(Checked, StridedEndIsThePlacePastTheLastElementOrNothing) {
  // A [3, 4] box at offset 5 with strides [10, 1]: last element at 5 + 2*10 + 3*1 = 28, so 29.
  const std::vector<std::int64_t> extents{3, 4};
  EXPECT_EQ(strided_end(5, extents, std::vector<std::int64_t>{10, 1}), 29);
  // 2^61 x 2 passes 2^63: no end, where the unchecked sum wrapped to a small number.
  EXPECT_EQ(strided_end(0, extents, std::vector<std::int64_t>{std::int64_t{1} << 62, 1}), std::nullopt);
  EXPECT_EQ(strided_end(0, extents, std::vector<std::int64_t>{0, 1}), std::nullopt);   // two in one place
  EXPECT_EQ(strided_end(0, extents, std::vector<std::int64_t>{-4, 1}), std::nullopt);  // backwards
  EXPECT_EQ(strided_end(0, std::vector<std::int64_t>{1, 4}, std::vector<std::int64_t>{0, 1}), 4);
  EXPECT_EQ(strided_end(0, extents, std::vector<std::int64_t>{1}), std::nullopt);  // a stride per dim
}

TEST(Utf8, AcceptsWellFormedText) {
  EXPECT_EQ(first_invalid_utf8("mlx5_0"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("gr\xc3\xbc\xc3\x9f \xe2\x82\xac \xf0\x9f\x98\x80"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8(""), std::nullopt);
}

TEST(Utf8, FindsTheFirstBadByte) {
  EXPECT_EQ(first_invalid_utf8("ab\xff"), 2u);            // never valid
  EXPECT_EQ(first_invalid_utf8("a\xc3"), 1u);             // cut short
  EXPECT_EQ(first_invalid_utf8("\xc0\xaf"), 0u);          // overlong '/'
  EXPECT_EQ(first_invalid_utf8("x\xed\xa0\x80"), 1u);     // a UTF-16 surrogate
  EXPECT_EQ(first_invalid_utf8("\xf4\x90\x80\x80"), 0u);  // above U+10FFFF
}

}  // namespace
}  // namespace refit
