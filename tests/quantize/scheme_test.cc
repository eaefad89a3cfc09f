#include "refit/quantize/scheme.h"

#include <random>

#include <gtest/gtest.h>

namespace refit {
namespace {

TEST(Scheme, NamesRoundTripAndUnknownNamesAreNamed) {
  ASSERT_EQ(all_schemes().size(), 2u);
  for (Scheme s : all_schemes()) EXPECT_EQ(parse_scheme(scheme_name(s)).value(), s);
  EXPECT_EQ(scheme_name(Scheme::kFp8Block128), "fp8-block128");
  EXPECT_EQ(scheme_name(Scheme::kMxfp8), "mxfp8");
  auto bad = parse_scheme("nvfp4");
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(bad.error().message.find("'nvfp4'"), std::string::npos);
  EXPECT_NE(bad.error().message.find("fp8-block128"), std::string::npos);
  EXPECT_NE(bad.error().message.find("mxfp8"), std::string::npos);
}

TEST(Scheme, DtypesFollowTheFormats) {
  // Both store e4m3 values; block128 keeps vLLM's fp32 weight_scale_inv, mxfp8 an e8m0 byte.
  EXPECT_EQ(value_dtype(Scheme::kFp8Block128), DType::kFP8E4M3);
  EXPECT_EQ(value_dtype(Scheme::kMxfp8), DType::kFP8E4M3);
  EXPECT_EQ(scale_dtype(Scheme::kFp8Block128), DType::kFP32);
  EXPECT_EQ(scale_dtype(Scheme::kMxfp8), DType::kFP8E8M0);
}

TEST(Scheme, BlocksSpanTheLastDims) {
  EXPECT_EQ(block_extent(Scheme::kFp8Block128, 2), (Shape{128, 128}));
  EXPECT_EQ(block_extent(Scheme::kFp8Block128, 3), (Shape{1, 128, 128}));  // one expert per block
  EXPECT_EQ(block_extent(Scheme::kMxfp8, 2), (Shape{1, 32}));
  EXPECT_EQ(block_extent(Scheme::kMxfp8, 3), (Shape{1, 1, 32}));
  // DeepSeek-V3's 7168x2048 down_proj: 56x16 fp32 scales; 7168x64 e8m0 scales.
  EXPECT_EQ(scale_shape(Scheme::kFp8Block128, {7168, 2048}), (Shape{56, 16}));
  EXPECT_EQ(scale_shape(Scheme::kMxfp8, {7168, 2048}), (Shape{7168, 64}));
  // Ragged: 3x130x70 is ceil(130/128) = 2 by ceil(70/128) = 1 per expert, or 70 = 2*32 + 6.
  EXPECT_EQ(scale_shape(Scheme::kFp8Block128, {3, 130, 70}), (Shape{3, 2, 1}));
  EXPECT_EQ(scale_shape(Scheme::kMxfp8, {3, 130, 70}), (Shape{3, 130, 3}));
}

// Brute force over the elements of one dim: the blocks that [lo, hi) touches, as [first, end).
std::pair<std::int64_t, std::int64_t> touched(std::int64_t lo, std::int64_t hi, std::int64_t block) {
  std::int64_t first = -1;
  std::int64_t end = -1;
  for (std::int64_t i = lo; i < hi; ++i) {
    if (first < 0) first = i / block;
    end = i / block + 1;
  }
  return first < 0 ? std::pair{lo / block, lo / block} : std::pair{first, end};
}

// Brute force: [lo, hi) holds every element of each block it touches (blocks end at n).
bool holds_whole_blocks(std::int64_t lo, std::int64_t hi, std::int64_t n, std::int64_t block) {
  for (std::int64_t i = lo; i < hi; ++i) {
    const std::int64_t start = i / block * block;
    const std::int64_t end = std::min(start + block, n);
    if (start < lo || end > hi) return false;
  }
  return true;
}

TEST(Scheme, GeometryMatchesBruteForceOnRandomBoxes) {
  std::mt19937_64 rng(17);
  auto pick = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int trial = 0; trial < 2000; ++trial) {
    const Scheme scheme = all_schemes()[trial % 2];
    const auto dims = static_cast<std::size_t>(pick(2, 4));
    Shape weight(dims);
    for (auto& n : weight) n = pick(1, 300);
    const Shape block = block_extent(scheme, dims);
    Box box{Shape(dims), Shape(dims)};
    for (std::size_t d = 0; d < dims; ++d) {
      // Half the boundaries on block multiples (or the edge), so that aligned boxes are common.
      auto boundary = [&] {
        const std::int64_t b = pick(0, weight[d]);
        return pick(0, 1) ? std::min(b / block[d] * block[d], weight[d]) : b;
      };
      std::int64_t lo = boundary();
      std::int64_t hi = boundary();
      if (lo > hi) std::swap(lo, hi);
      box.offset[d] = lo;
      box.extent[d] = hi - lo;
    }
    const Box scales = scale_box(scheme, box);
    bool aligned = true;
    for (std::size_t d = 0; d < dims; ++d) {
      const std::int64_t hi = box.offset[d] + box.extent[d];
      // scale_shape: the number of blocks the whole dim touches.
      EXPECT_EQ(scale_shape(scheme, weight)[d], touched(0, weight[d], block[d]).second);
      const auto [first, end] = touched(box.offset[d], hi, block[d]);
      EXPECT_EQ(scales.offset[d], first) << box.to_string();
      EXPECT_EQ(scales.extent[d], end - first) << box.to_string();
      aligned = aligned && holds_whole_blocks(box.offset[d], hi, weight[d], block[d]);
      // An empty extent holds no element, but its offset still cuts the blocks.
      if (box.extent[d] == 0) aligned = aligned && box.offset[d] % block[d] == 0;
    }
    EXPECT_EQ(block_aligned(scheme, box, weight), aligned) << scheme_name(scheme) << " " << box.to_string();
  }
}

}  // namespace
}  // namespace refit
