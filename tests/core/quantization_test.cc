#include "refit/core/quantization.h"

#include <gtest/gtest.h>

#include <random>

#include "error_code.h"

namespace refit {
namespace {

constexpr auto kBlock = QuantScheme::kFp8Block128;
constexpr auto kMx = QuantScheme::kMxfp8;

Layout make(Shape shape, std::vector<std::int64_t> mesh, const char* placements) {
  return Layout::make(std::move(shape), Mesh::make(std::move(mesh)).value(),
                      parse_placements(placements).value())
      .value();
}

TEST(QuantScheme, NamesDtypesAndBlocks) {
  EXPECT_EQ(parse_quant_scheme("fp8-block128").value(), kBlock);
  EXPECT_EQ(parse_quant_scheme("mxfp8").value(), kMx);
  EXPECT_EQ(testing::error_code(parse_quant_scheme("int4")), ErrorCode::kParse);
  EXPECT_EQ(quant_scale_dtype(kBlock), DType::kFP32);
  EXPECT_EQ(quant_scale_dtype(kMx), DType::kFP8E8M0);
  // Stacked experts [E, out, in]: blocks of one expert each.
  EXPECT_EQ(quant_block(kBlock, 3), (Shape{1, 128, 128}));
  EXPECT_EQ(quant_block(kMx, 2), (Shape{1, 32}));
}

TEST(QuantScheme, ScalesCoverTheRaggedEdge) {
  // 7168 x 2112: 56 x 16.5 blocks -> 56 x 17 scales; mxfp8: 2112 / 32 = 66 per row.
  EXPECT_EQ(quant_scale_shape(kBlock, {7168, 2112}), (Shape{56, 17}));
  EXPECT_EQ(quant_scale_shape(kMx, {7168, 2112}), (Shape{7168, 66}));
  EXPECT_EQ(quant_scale_shape(kBlock, {256, 2048, 7168}), (Shape{256, 16, 56}));
}

TEST(QuantScheme, BlockAlignmentMatchesBruteForce) {
  // A box is aligned when every block it touches lies wholly in it: count the elements of the
  // touched blocks (clipped to the weight) and compare with the box's volume.
  const Shape weight{300, 200};
  std::mt19937 rng(7);
  for (int i = 0; i < 500; ++i) {
    std::uniform_int_distribution<std::int64_t> r(0, 300), c(0, 200);
    std::int64_t r0 = r(rng), r1 = r(rng), c0 = c(rng), c1 = c(rng);
    if (r0 > r1) std::swap(r0, r1);
    if (c0 > c1) std::swap(c0, c1);
    if (r0 == r1 || c0 == c1) continue;
    const Box box{{r0, c0}, {r1 - r0, c1 - c0}};
    for (const auto s : all_quant_schemes()) {
      const Box blocks = quant_scale_box(s, box);
      const Shape b = quant_block(s, 2);
      const std::int64_t rows =
          std::min(weight[0], (blocks.offset[0] + blocks.extent[0]) * b[0]) - blocks.offset[0] * b[0];
      const std::int64_t cols =
          std::min(weight[1], (blocks.offset[1] + blocks.extent[1]) * b[1]) - blocks.offset[1] * b[1];
      EXPECT_EQ(quant_block_aligned(s, box, weight), rows * cols == box.volume()) << box.to_string();
    }
  }
}

TEST(QuantScaleLayout, FollowsTheWeightsCuts) {
  // 1024 rows over tp=8: 128 each, one block row each; the scales' 8 rows split 1 each.
  const auto scales = quant_scale_layout(kBlock, make({1024, 7168}, {8}, "S0")).value();
  EXPECT_EQ(scales.tensor_shape(), (Shape{8, 56}));
  EXPECT_EQ(scales.box_at_position(3), (Box{{3, 0}, {1, 56}}));
}

TEST(QuantScaleLayout, AnExplicitChunkAndARaggedLastPart) {
  // 600 rows in parts of 256: 256, 256, 88 rows; scales 5 rows in parts of 2: 2, 2, 1 (the last
  // part's 88 rows end at the weight's edge, so its one block row is whole there).
  const auto scales = quant_scale_layout(kBlock, make({600, 64}, {3}, "S0:256")).value();
  EXPECT_EQ(scales.box_at_position(2), (Box{{4, 0}, {1, 1}}));
  // torch.chunk of 1000 rows over 4 is 250 a rank: cut through blocks.
  EXPECT_FALSE(quant_scale_layout(kBlock, make({1000, 128}, {4}, "S0")));
}

TEST(QuantScaleLayout, RefusesACutThroughABlockNamingThePosition) {
  // vLLM: down_proj's input 768 over tp=8 is 96 per rank, not a multiple of 128.
  const auto bad = quant_scale_layout(kBlock, make({2048, 768}, {8}, "S1"));
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("mesh position 0"), std::string::npos) << bad.error().message;
  // mxfp8 blocks are 32 wide: 96 columns a rank is whole blocks.
  EXPECT_TRUE(quant_scale_layout(kMx, make({2048, 768}, {8}, "S1")));
}

}  // namespace
}  // namespace refit
