#include "refit/core/quantization.h"

#include <gtest/gtest.h>

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

TEST(QuantScaleLayout, AShiftedGridDividesByTheBlock) {
  // Parts of 256 rows from -384: 0, 128, 256, 256 of 640 rows; scales parts of 2 from -3: 0, 1, 2,
  // 2 block rows.
  const auto weight = make({640, 128}, {4}, "S0:256@-384");
  const auto scales = quant_scale_layout(kBlock, weight).value();
  EXPECT_EQ(scales.placements()[0], Placement::shard(0, 2, -3));
  EXPECT_EQ(scales.box_at_position(1), (Box{{0, 0}, {1, 1}}));
  EXPECT_EQ(scales.box_at_position(3), (Box{{3, 0}, {2, 1}}));
  // From -64 the parts cut blocks in half.
  EXPECT_FALSE(quant_scale_layout(kBlock, make({640, 128}, {4}, "S0:256@-64")));
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
