// The CPU quantizer against the reference vectors (bit for bit), on contiguous, padded,
// column-major and sub-box views, and its error bound on random weights.
#include "refit/quantize/quantize.h"

#include <cmath>
#include <cstring>
#include <random>

#include <gtest/gtest.h>

#include "vectors.h"

namespace refit {
namespace {

using testing::Expected;
using testing::quantize_view;
using testing::reference_vectors;
using testing::row_major_strides;
using testing::VectorCase;

// The first differing byte, or -1.
template <class T>
std::int64_t first_difference(const std::vector<T>& a, const std::vector<T>& b) {
  if (a.size() != b.size()) return 0;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i] != b[i]) return static_cast<std::int64_t>(i);
  return -1;
}

void expect_matches(const Expected& got, const Expected& want, const std::string& what) {
  const auto v = first_difference(got.values, want.values);
  EXPECT_EQ(v, -1) << what << ": value " << v << " is " << int(got.values.at(v)) << ", the reference "
                   << int(want.values.at(v));
  EXPECT_EQ(first_difference(got.scales, want.scales), -1) << what << ": scales differ";
}

TEST(QuantizeVectors, ContiguousWeightsMatchTheReferenceBitForBit) {
  for (const VectorCase& c : reference_vectors())
    for (Scheme s : all_schemes()) {
      const Bf16View view{c.input.data(), c.shape, row_major_strides(c.shape)};
      expect_matches(quantize_view(s, view), c.expected(s), c.name + " " + std::string(scheme_name(s)));
    }
}

TEST(QuantizeVectors, StridedViewsGiveTheSameBytes) {
  for (const VectorCase& c : reference_vectors())
    for (Scheme s : all_schemes()) {
      const std::size_t dims = c.shape.size();
      const Shape dense = row_major_strides(c.shape);
      // Padded: every row 5 elements longer than the weight (a column shard of a wider tensor).
      Shape padded_shape = c.shape;
      padded_shape[dims - 1] += 5;
      const Shape padded_strides = row_major_strides(padded_shape);
      std::vector<std::uint16_t> padded(static_cast<std::size_t>(element_count(padded_shape)), 0x7FC0);
      // Column-major: the last dim is the slowest (stride != 1, the gathering path).
      Shape column_strides(dims, 1);
      for (std::size_t d = 1; d < dims; ++d) column_strides[d] = column_strides[d - 1] * c.shape[d - 1];
      std::vector<std::uint16_t> columns(c.input.size());
      for (std::int64_t i = 0; i < element_count(c.shape); ++i) {
        std::int64_t rest = i;
        std::int64_t p = 0;
        std::int64_t q = 0;
        for (std::size_t d = dims; d-- > 0;) {
          const std::int64_t index = rest % c.shape[d];
          rest /= c.shape[d];
          p += index * padded_strides[d];
          q += index * column_strides[d];
        }
        padded[p] = c.input[i];
        columns[q] = c.input[i];
      }
      const std::string what = c.name + " " + std::string(scheme_name(s));
      expect_matches(quantize_view(s, {padded.data(), c.shape, padded_strides}), c.expected(s),
                     what + " padded");
      expect_matches(quantize_view(s, {columns.data(), c.shape, column_strides}), c.expected(s),
                     what + " columns");
    }
}

// The part of a row-major array of `shape` that `box` covers, row-major.
template <class T>
std::vector<T> slice(const std::vector<T>& all, const Shape& shape, const Box& box, std::int64_t unit) {
  std::vector<T> out;
  const Shape strides = row_major_strides(shape);
  for (std::int64_t i = 0; i < box.volume(); ++i) {
    std::int64_t rest = i;
    std::int64_t at = 0;
    for (std::size_t d = box.rank(); d-- > 0;) {
      at += (box.offset[d] + rest % box.extent[d]) * strides[d];
      rest /= box.extent[d];
    }
    for (std::int64_t b = 0; b < unit; ++b) out.push_back(all[at * unit + b]);
  }
  return out;
}

TEST(QuantizeVectors, BlockAlignedBoxesQuantizeAsPartsOfTheWhole) {
  // A box cut on block boundaries is quantized alone (a sender's shard): its values are the
  // whole weight's values in the box, and its scales the whole weight's scales in scale_box.
  std::mt19937_64 rng(5);
  int boxes = 0;
  for (const VectorCase& c : reference_vectors())
    for (Scheme s : all_schemes()) {
      const Shape block = block_extent(s, c.shape.size());
      const Shape blocks = scale_shape(s, c.shape);
      for (int trial = 0; trial < 20; ++trial) {
        Box box{Shape(c.shape.size()), Shape(c.shape.size())};
        for (std::size_t d = 0; d < c.shape.size(); ++d) {
          const auto first = std::uniform_int_distribution<std::int64_t>(0, blocks[d] - 1)(rng);
          const auto end = std::uniform_int_distribution<std::int64_t>(first + 1, blocks[d])(rng);
          box.offset[d] = first * block[d];
          box.extent[d] = std::min(end * block[d], c.shape[d]) - box.offset[d];
        }
        ASSERT_TRUE(block_aligned(s, box, c.shape));
        const Shape strides = row_major_strides(c.shape);
        std::int64_t corner = 0;
        for (std::size_t d = 0; d < box.rank(); ++d) corner += box.offset[d] * strides[d];
        const Expected got = quantize_view(s, {c.input.data() + corner, box.extent, strides});
        const Expected& whole = c.expected(s);
        const Expected want{slice(whole.values, c.shape, box, 1),
                            slice(whole.scales, blocks, scale_box(s, box), dtype_size(scale_dtype(s)))};
        expect_matches(got, want, c.name + " " + std::string(scheme_name(s)) + " " + box.to_string());
        ++boxes;
      }
    }
  EXPECT_EQ(boxes, 200);
}

TEST(QuantizeVectors, CheckedEntryNamesWhatIsWrong) {
  const std::vector<std::uint16_t> data(64, 0x3F80);
  std::vector<std::uint8_t> values(64);
  std::vector<std::byte> scales(8);  // 2x32 mxfp8: 2 e8m0 bytes; block128: one fp32
  EXPECT_TRUE(
      quantize_checked(Scheme::kMxfp8, {data.data(), {2, 32}, {32, 1}}, values, std::span(scales).first(2)));
  EXPECT_TRUE(quantize_checked(Scheme::kFp8Block128, {data.data(), {2, 32}, {32, 1}}, values,
                               std::span(scales).first(4)));
  auto one_dim = quantize_checked(Scheme::kMxfp8, {data.data(), {64}, {1}}, values, scales);
  ASSERT_FALSE(one_dim);
  EXPECT_EQ(one_dim.error().code, ErrorCode::kInvalidArgument);
  auto short_scales = quantize_checked(Scheme::kFp8Block128, {data.data(), {2, 32}, {32, 1}}, values, scales);
  ASSERT_FALSE(short_scales);
  EXPECT_EQ(short_scales.error().code, ErrorCode::kMismatch);
  EXPECT_NE(short_scales.error().message.find("scales"), std::string::npos);
  auto negative =
      quantize_checked(Scheme::kMxfp8, {data.data(), {2, 32}, {-32, 1}}, values, std::span(scales).first(2));
  ASSERT_FALSE(negative);
  EXPECT_EQ(negative.error().code, ErrorCode::kOutOfRange);
}

// Half the spacing of e4m3 values around |q| (2^-9 below 2^-6, 2^(k-3) in [2^k, 2^(k+1))).
double half_ulp(std::uint8_t code) {
  const int exponent = (code >> 3) & 0xF;
  return std::ldexp(1.0, (exponent == 0 ? 1 : exponent) - 7 - 3) / 2;
}

TEST(QuantizeVectors, DequantizedValuesAreWithinHalfAnUlpOfTheInput) {
  // For x in a block with scale S (block128: scale_inv; mxfp8: 2^(byte - 127)) and code q:
  // |e4m3(q) * S - x| <= half_ulp(q) * S, as round-to-nearest promises, unless |x| / S > 448
  // (mxfp8 only: its power-of-two scale leaves up to 2^9), where q saturates to +-448. block128's
  // multiplier is fp32(1 / scale_inv), one fp32 rounding off 1 / S: 2^-22 relative slack.
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal;
  const Shape shape{3, 200, 300};
  std::vector<std::uint16_t> input(static_cast<std::size_t>(element_count(shape)));
  for (std::size_t i = 0; i < input.size(); ++i) {
    const float x = static_cast<float>(std::ldexp(normal(rng), static_cast<int>(i / 300 % 40) - 20));
    std::uint32_t bits;
    std::memcpy(&bits, &x, 4);
    input[i] = static_cast<std::uint16_t>(bits >> 16);  // truncation is as good a bf16 as any
  }
  for (Scheme s : all_schemes()) {
    const Expected out = quantize_view(s, {input.data(), shape, row_major_strides(shape)});
    const Shape blocks = scale_shape(s, shape);
    const Shape block = block_extent(s, shape.size());
    for (std::int64_t i = 0; i < element_count(shape); ++i) {
      const std::int64_t e = i / (shape[1] * shape[2]);
      const std::int64_t r = i / shape[2] % shape[1];
      const std::int64_t col = i % shape[2];
      const std::int64_t b = (e * blocks[1] + r / block[1]) * blocks[2] + col / block[2];
      double scale;
      if (s == Scheme::kMxfp8) {
        scale = std::ldexp(1.0, static_cast<int>(out.scales[b]) - 127);
      } else {
        float f;
        std::memcpy(&f, &out.scales[b * 4], 4);
        scale = f;
      }
      const double x = fp8::bf16_to_fp32(input[i]);
      const std::uint8_t q = out.values[i];
      if (std::fabs(x) / scale > 448.0) {
        ASSERT_EQ(q & 0x7F, 0x7E) << i;
        continue;
      }
      const double error = std::fabs(testing::e4m3_value(q) * scale - x);
      ASSERT_LE(error, half_ulp(q) * scale + std::fabs(x) * 0x1p-22) << scheme_name(s) << " element " << i;
    }
  }
}

}  // namespace
}  // namespace refit
