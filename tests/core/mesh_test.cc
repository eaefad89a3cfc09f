#include "refit/core/mesh.h"

#include <gtest/gtest.h>

#include "error_code.h"

namespace refit {
namespace {

TEST(Mesh, DefaultRanksAreRowMajor) {
  auto m = Mesh::make({3, 2});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->size(), 6);
  // position 3 in a 3x2 mesh is coordinate (1, 1).
  EXPECT_EQ(m->coord_of_position(3), (std::vector<std::int64_t>{1, 1}));
  EXPECT_EQ(m->position_of_coord({2, 0}), 4);
  EXPECT_EQ(m->rank_at(5), Rank{5});
}

TEST(Mesh, ExplicitRanks) {
  auto m = Mesh::make({2, 2}, {Rank{7}, Rank{3}, Rank{9}, Rank{4}});
  ASSERT_TRUE(m);
  EXPECT_EQ(m->position_of_rank(Rank{9}), 2);
  EXPECT_FALSE(m->position_of_rank(Rank{0}).has_value());
}

TEST(Mesh, RejectsBadInput) {
  EXPECT_EQ(testing::error_code(Mesh::make({})), ErrorCode::kOutOfRange);
  EXPECT_EQ(testing::error_code(Mesh::make({1, 1, 1, 1, 1})), ErrorCode::kOutOfRange);  // at most 4 axes
  EXPECT_EQ(testing::error_code(Mesh::make({0})), ErrorCode::kOutOfRange);
  auto count = Mesh::make({2, 2}, {Rank{0}, Rank{1}});
  ASSERT_FALSE(count);
  EXPECT_EQ(count.error().code, ErrorCode::kMismatch);
  EXPECT_NE(count.error().message.find("ranks"), std::string::npos);
  auto dup = Mesh::make({2}, {Rank{3}, Rank{3}});
  ASSERT_FALSE(dup);
  EXPECT_EQ(dup.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(dup.error().message.find("ranks[1]"), std::string::npos);
  EXPECT_EQ(testing::error_code(Mesh::make({1}, {Rank{-1}})), ErrorCode::kOutOfRange);
  EXPECT_EQ(testing::error_code(Mesh::make({2}, {}, {"a", "b"})), ErrorCode::kMismatch);
}

}  // namespace
}  // namespace refit
