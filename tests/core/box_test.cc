#include "refit/core/box.h"

#include <gtest/gtest.h>

namespace refit {
namespace {

TEST(Box, VolumeIsProductOfExtents) {
  // 4 x 7 = 28; any zero extent makes the box empty.
  EXPECT_EQ((Box{{0, 0}, {4, 7}}.volume()), 28);
  EXPECT_TRUE((Box{{3, 0}, {0, 7}}.empty()));
}

TEST(Box, IntersectionOfOverlappingBoxes) {
  // [0,4)x[0,7) and [2,6)x[5,9) share [2,4)x[5,7).
  auto i = intersect(Box{{0, 0}, {4, 7}}, Box{{2, 5}, {4, 4}});
  ASSERT_TRUE(i.has_value());
  EXPECT_EQ(*i, (Box{{2, 5}, {2, 2}}));
}

TEST(Box, TouchingBoxesDoNotIntersect) {
  // [0,4) and [4,8) share no element.
  EXPECT_FALSE(intersect(Box{{0}, {4}}, Box{{4}, {4}}).has_value());
  EXPECT_FALSE(intersect(Box{{0, 0}, {4, 4}}, Box{{0}, {4}}).has_value());  // rank mismatch
}

TEST(Box, Containment) {
  const Box outer{{0, 0}, {10, 7}};
  EXPECT_TRUE(outer.contains(Box{{2, 3}, {8, 4}}));
  EXPECT_FALSE(outer.contains(Box{{2, 3}, {9, 4}}));   // row 10 is outside
  EXPECT_TRUE(outer.contains(Box{{50, 50}, {0, 1}}));  // empty boxes fit anywhere
  EXPECT_TRUE(outer.contains_point({9, 6}));
  EXPECT_FALSE(outer.contains_point({10, 0}));
}

TEST(Box, RowMajorStridesStepOverTheDimsAfter) {
  // [2, 3, 4] row-major: one step of dim 0 skips 3*4 elements, of dim 1 skips 4, of dim 2 one.
  EXPECT_EQ(row_major_strides({2, 3, 4}), (Shape{12, 4, 1}));
  EXPECT_EQ(row_major_strides({7}), (Shape{1}));
}

TEST(Box, ToStringUsesHalfOpenRanges) { EXPECT_EQ((Box{{2, 0}, {3, 7}}.to_string()), "[2:5, 0:7]"); }

}  // namespace
}  // namespace refit
