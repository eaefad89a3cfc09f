#include "refit/core/overlap.h"

#include <gtest/gtest.h>

#include "error_code.h"

namespace refit {
namespace {

Layout make(Shape shape, std::vector<std::int64_t> mesh, std::vector<Rank> ranks, const char* placements) {
  return Layout::make(std::move(shape), Mesh::make(std::move(mesh), std::move(ranks)).value(),
                      parse_placements(placements).value())
      .value();
}

TEST(Overlap, RowShardsToColumnShards) {
  // 4x4: source rows [0,2) on rank 0 and [2,4) on rank 1; destination columns [0,2) on rank 2
  // and [2,4) on rank 3. Each destination needs two 2x2 pieces, one from each source.
  const auto src = make({4, 4}, {2}, {Rank{0}, Rank{1}}, "S0");
  const auto dst = make({4, 4}, {2}, {Rank{2}, Rank{3}}, "S1");
  const auto o = overlaps(src, dst).value();
  ASSERT_EQ(o.destinations.size(), 2u);
  const auto* d3 = o.destination_of(Rank{3});
  ASSERT_NE(d3, nullptr);
  ASSERT_EQ(d3->pieces.size(), 2u);
  EXPECT_EQ(d3->pieces[0].box, (Box{{0, 2}, {2, 2}}));
  EXPECT_EQ(o.holders(d3->pieces[0]), (std::vector<Rank>{Rank{0}}));
  EXPECT_EQ(d3->pieces[1].box, (Box{{2, 2}, {2, 2}}));
  EXPECT_EQ(o.holders(d3->pieces[1]), (std::vector<Rank>{Rank{1}}));
}

TEST(Overlap, ReplicasAreListedAsHoldersAndDestinations) {
  // Source 2x2 mesh S0,R: rows [0,5) on ranks 0,1 and [5,10) on ranks 2,3. Destination fully
  // replicated on ranks 4,5: one destination shard, two pieces, two holders each.
  const auto src = make({10}, {2, 2}, {}, "S0,R");
  const auto dst = make({10}, {2}, {Rank{4}, Rank{5}}, "R");
  const auto o = overlaps(src, dst).value();
  ASSERT_EQ(o.destinations.size(), 1u);
  EXPECT_EQ(o.destinations[0].shard.holders, (std::vector<Rank>{Rank{4}, Rank{5}}));
  ASSERT_EQ(o.destinations[0].pieces.size(), 2u);
  EXPECT_EQ(o.holders(o.destinations[0].pieces[1]), (std::vector<Rank>{Rank{2}, Rank{3}}));
}

TEST(Overlap, EmptyShardsNeedNothing) {
  // 5 over 4: destination rank 3 holds the empty shard at offset 5 and needs no piece.
  const auto src = make({5}, {1}, {Rank{9}}, "R");
  const auto dst = make({5}, {4}, {}, "S0");
  const auto o = overlaps(src, dst).value();
  EXPECT_EQ(o.destinations.size(), 3u);
  EXPECT_EQ(o.destination_of(Rank{3}), nullptr);
}

TEST(Overlap, ShapeMismatchIsRefused) {
  auto r = overlaps(make({4}, {1}, {}, "R"), make({5}, {1}, {}, "R"));
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kMismatch);
  EXPECT_NE(r.error().message.find("[0:4]"), std::string::npos);
}

}  // namespace
}  // namespace refit
