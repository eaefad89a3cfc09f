#include "refit/core/layout.h"

#include <gtest/gtest.h>

#include "error_code.h"

namespace refit {
namespace {

Layout make(Shape shape, std::vector<std::int64_t> mesh, const char* placements) {
  return Layout::make(std::move(shape), Mesh::make(std::move(mesh)).value(),
                      parse_placements(placements).value())
      .value();
}

std::vector<std::int64_t> extents(const Layout& l, std::size_t dim) {
  std::vector<std::int64_t> out;
  for (std::int64_t p = 0; p < l.mesh().size(); ++p) out.push_back(l.box_at_position(p).extent[dim]);
  return out;
}

TEST(ChunkInterval, FollowsTorchChunk) {
  // chunk = ceil(10/4) = 3: offsets 0,3,6,9 and extents 3,3,3,1.
  EXPECT_EQ(chunk_interval(10, 4, 3), (Interval{9, 1}));
  // chunk = ceil(5/4) = 2: the last part starts at min(6,5) = 5 and is empty.
  EXPECT_EQ(chunk_interval(5, 4, 2), (Interval{4, 1}));
  EXPECT_EQ(chunk_interval(5, 4, 3), (Interval{5, 0}));
  // Nothing to split: every part is empty at offset 0.
  EXPECT_EQ(chunk_interval(0, 3, 2), (Interval{0, 0}));
}

TEST(Layout, TenOverFourIsThreeThreeThreeOne) {
  EXPECT_EQ(extents(make({10}, {4}, "S0"), 0), (std::vector<std::int64_t>{3, 3, 3, 1}));
}

TEST(Layout, FiveOverFourEndsWithAnEmptyShardAtOffsetFive) {
  const auto l = make({5}, {4}, "S0");
  EXPECT_EQ(extents(l, 0), (std::vector<std::int64_t>{2, 2, 1, 0}));
  EXPECT_EQ(l.box_at_position(3).offset[0], 5);
}

TEST(Layout, ReplicateAxisRepeatsTheBox) {
  // 10x7 on a 3x2 mesh, S0 on axis 0: rows split 4,4,2; both columns of the mesh hold the same.
  const auto l = make({10, 7}, {3, 2}, "S0,R");
  EXPECT_EQ(l.box_at_position(0), (Box{{0, 0}, {4, 7}}));
  EXPECT_EQ(l.box_at_position(1), (Box{{0, 0}, {4, 7}}));
  EXPECT_EQ(l.box_at_position(4), (Box{{8, 0}, {2, 7}}));
}

TEST(Layout, TwoMeshAxesOnOneDimNestInAxisOrder) {
  // 10 rows, axes of 2 then 3 both shard dim 0: axis 0 splits 10 into 5,5; axis 1 splits each
  // 5 into 2,2,1. Offsets add: 0,2,4 | 5,7,9.
  const auto l = make({10, 4}, {2, 3}, "S0,S0");
  std::vector<std::int64_t> offsets;
  for (std::int64_t p = 0; p < 6; ++p) offsets.push_back(l.box_at_position(p).offset[0]);
  EXPECT_EQ(offsets, (std::vector<std::int64_t>{0, 2, 4, 5, 7, 9}));
  EXPECT_EQ(extents(l, 0), (std::vector<std::int64_t>{2, 2, 1, 2, 2, 1}));
}

TEST(Layout, TwoDimsShardedIndependently) {
  // 6x8 on 2x4 with S1,S0: axis 0 splits columns 4,4; axis 1 splits rows 2,2,2,0.
  const auto l = make({6, 8}, {2, 4}, "S1,S0");
  EXPECT_EQ(l.box_at_position(6), (Box{{4, 4}, {2, 4}}));  // coord (1,2)
  EXPECT_EQ(l.box_at_position(7), (Box{{6, 4}, {0, 4}}));  // coord (1,3): empty at offset 6
}

TEST(Layout, AnExplicitChunkCutsAtItsMultiples) {
  // Megatron pads a vocabulary of 10 rows to 16 for tp=4, 4 rows a rank: the real rows are
  // [0,4), [4,8), [8,10) and nothing, where torch.chunk would give 3,3,3,1.
  const auto l = make({10, 2}, {4}, "S0:4");
  EXPECT_EQ(extents(l, 0), (std::vector<std::int64_t>{4, 4, 2, 0}));
  EXPECT_EQ(l.box_at_position(2).offset[0], 8);
  EXPECT_EQ(l.box_at_position(3).offset[0], 10);  // empty at the dim's size, as torch reports it
}

TEST(Layout, AnExplicitChunkNestsAfterAnotherSplit) {
  // Axis 0 cuts 10 rows 5,5; axis 1 cuts each 5 into parts of 2: 2,2,1. Offsets 0,2,4 | 5,7,9.
  const auto l = make({10}, {2, 3}, "S0,S0:2");
  EXPECT_EQ(extents(l, 0), (std::vector<std::int64_t>{2, 2, 1, 2, 2, 1}));
  EXPECT_EQ(l.box_at_position(4).offset[0], 7);
}

TEST(Layout, AShiftedChunkGridCutsWhereTheFusedTensorWasCut) {
  // Megatron's linear_qkv of one query group: 4 q heads, k, v of 2 rows each = 12 rows, split
  // evenly over 4 ranks (3 rows each). k_proj's 2 rows are group rows 8..9, so part i of k is
  // [3i - 8, 3i - 5) clipped to [0, 2): ranks 0, 1 nothing, rank 2 row 0 (group row 8), rank 3
  // row 1 (group row 9).
  const auto l = make({2, 5}, {4}, "S0:3@-8");
  EXPECT_EQ(extents(l, 0), (std::vector<std::int64_t>{0, 0, 1, 1}));
  EXPECT_EQ(l.box_at_position(2).offset[0], 0);
  EXPECT_EQ(l.box_at_position(3).offset[0], 1);
  // q_proj's 8 rows are group rows 0..7: 3, 3, 2 and nothing.
  EXPECT_EQ(extents(make({8, 5}, {4}, "S0:3"), 0), (std::vector<std::int64_t>{3, 3, 2, 0}));
}

TEST(Layout, AShiftedChunkGridTilesTheDimLikeTheBruteForceCut) {
  // Every length, parts, chunk and start that covers the dim: part i holds exactly the elements e
  // with start + i*chunk <= e < start + (i+1)*chunk, found by testing every element.
  for (std::int64_t length = 0; length <= 9; ++length)
    for (std::int64_t parts = 1; parts <= 4; ++parts)
      for (std::int64_t chunk = 1; chunk <= 5; ++chunk)
        for (std::int64_t start = 0; start >= -6; --start) {
          const auto l =
              Layout::make({length}, Mesh::make({parts}).value(), {Placement::shard(0, chunk, start)});
          ASSERT_EQ(static_cast<bool>(l), start + parts * chunk >= length)
              << length << " " << parts << " " << chunk << " " << start;
          if (!l) continue;
          for (std::int64_t i = 0; i < parts; ++i) {
            std::int64_t first = -1, count = 0;
            for (std::int64_t e = 0; e < length; ++e)
              if (start + i * chunk <= e && e < start + (i + 1) * chunk) {
                if (first < 0) first = e;
                ++count;
              }
            const Box box = l->box_at_position(i);
            EXPECT_EQ(box.extent[0], count);
            if (count > 0) EXPECT_EQ(box.offset[0], first);
          }
        }
}

TEST(Layout, RefusesAChunkThatLeavesElementsInNoPart) {
  // 4 parts of 2 hold 8 of the 10 rows.
  auto mesh = Mesh::make({4}).value();
  auto l = Layout::make({10}, mesh, {Placement::shard(0, 2)});
  ASSERT_FALSE(l);
  EXPECT_EQ(l.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(l.error().message.find("placements[0]"), std::string::npos);
  // After a split of 2, each part has at most 5 rows: 3 parts of 2 cover them.
  EXPECT_TRUE(Layout::make({10}, Mesh::make({2, 3}).value(), {Placement::shard(0), Placement::shard(0, 2)}));
  // A start shifts the grid: 4 parts of 3 from -2 reach row 10 and no further.
  EXPECT_TRUE(Layout::make({10}, mesh, {Placement::shard(0, 3, -2)}));
  EXPECT_FALSE(Layout::make({11}, mesh, {Placement::shard(0, 3, -2)}));
  // A start needs a chunk and may not be positive.
  EXPECT_FALSE(Layout::make({10}, mesh, {Placement{.kind = Placement::Kind::kShard, .dim = 0, .start = -2}}));
  EXPECT_FALSE(Layout::make({10}, mesh, {Placement::shard(0, 3, 1)}));
}

TEST(Layout, LocalBoxUsesGlobalRanks) {
  auto mesh = Mesh::make({3, 2}, {Rank{4}, Rank{5}, Rank{6}, Rank{7}, Rank{8}, Rank{9}}).value();
  auto l = Layout::make({10, 7}, mesh, parse_placements("S0,R").value()).value();
  EXPECT_EQ(local_box(l, Rank{8}).value(), (Box{{8, 0}, {2, 7}}));
  auto missing = local_box(l, Rank{0});
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("rank 0"), std::string::npos);
}

TEST(Layout, RejectsPlacementOutOfRangeAndCountMismatch) {
  auto mesh = Mesh::make({2}).value();
  auto out_of_range = Layout::make({4, 4}, mesh, {Placement::shard(2)});
  ASSERT_FALSE(out_of_range);
  EXPECT_EQ(out_of_range.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(out_of_range.error().message.find("S2"), std::string::npos);
  EXPECT_EQ(testing::error_code(Layout::make({4}, mesh, {Placement::shard(0), Placement::replicate()})),
            ErrorCode::kMismatch);
  EXPECT_EQ(testing::error_code(Layout::make({}, mesh, {Placement::replicate()})),
            ErrorCode::kInvalidArgument);
  EXPECT_EQ(testing::error_code(Layout::make({-3}, mesh, {Placement::replicate()})), ErrorCode::kOutOfRange);
}

}  // namespace
}  // namespace refit
