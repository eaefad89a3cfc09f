// Arrays: range boxes cover exactly an element range, and a Walk's runs are exactly the maximal
// stretches that brute force finds contiguous in every array, at the offsets brute force computes.
#include "refit/lowering/arrays.h"

#include <random>
#include <set>

#include <gtest/gtest.h>

#include "random_boxes.h"

namespace refit::lowering {
namespace {

using Random = refit::testing::RandomBoxes;

// Byte offset of element `index` of x in an array of `array` at `base`, by definition.
std::int64_t brute_offset(std::int64_t base, const Box& array, const Box& x, std::int64_t index,
                          std::int64_t es) {
  return base + row_major_index(array, point_at(x, index)) * es;
}

TEST(RangeBoxes, CoverExactlyTheRangeWithFewBoxes) {
  Random r(1);
  for (int i = 0; i < 3000; ++i) {
    const Box b = r.box(static_cast<std::size_t>(r.uniform(1, 4)), 5);
    const auto first = r.uniform(0, b.volume() - 1);
    const auto end = r.uniform(first + 1, b.volume());
    std::vector<Box> boxes;
    range_boxes(b, first, end, boxes);
    std::set<std::int64_t> covered;
    for (const auto& x : boxes) {
      ASSERT_TRUE(b.contains(x));
      for (std::int64_t e = 0; e < x.volume(); ++e)
        ASSERT_TRUE(covered.insert(row_major_index(b, point_at(x, e))).second) << "element covered twice";
    }
    ASSERT_EQ(static_cast<std::int64_t>(covered.size()), end - first);
    EXPECT_EQ(*covered.begin(), first);
    EXPECT_EQ(*covered.rbegin(), end - 1);
    EXPECT_LE(boxes.size(), 2 * b.rank() - 1);
  }
}

// For random boxes x inside two random arrays and random element ranges: offset_of() is the
// definition, runs() counts the maximal stretches where consecutive elements are adjacent in both
// arrays, and for_each_run() walks exactly those stretches.
TEST(Walk, RunsAreTheMaximalStretchesContiguousInEveryArray) {
  Random r(2);
  for (int i = 0; i < 4000; ++i) {
    const auto dims = static_cast<std::size_t>(r.uniform(1, 4));
    const Box a = r.box(dims, 6);
    const Box b = r.box(dims, 6);
    Box both = a;
    for (std::size_t d = 0; d < dims; ++d) {
      both.offset[d] = std::max(a.offset[d], b.offset[d]);
      const auto end = std::min(a.offset[d] + a.extent[d], b.offset[d] + b.extent[d]);
      both.extent[d] = std::max<std::int64_t>(0, end - both.offset[d]);
    }
    if (both.empty()) continue;
    const Box x = r.inside(both);
    const std::int64_t es = std::int64_t{1} << r.uniform(0, 3);
    const Array from{.offset = r.uniform(0, 64), .box = &a};
    const Array to{.offset = r.uniform(0, 64), .box = &b};
    const Walk one(from, x, es);
    const Walk two(from, to, x, es);
    const auto first = r.uniform(0, x.volume() - 1);
    const auto count = r.uniform(1, x.volume() - first);
    std::int64_t runs_one = 1;
    std::int64_t runs_two = 1;
    for (std::int64_t e = first; e < first + count; ++e) {
      ASSERT_EQ(one.offset_of(0, e), brute_offset(from.offset, a, x, e, es));
      ASSERT_EQ(two.offset_of(1, e), brute_offset(to.offset, b, x, e, es));
      if (e == first) continue;
      const bool next_a =
          brute_offset(from.offset, a, x, e, es) == brute_offset(from.offset, a, x, e - 1, es) + es;
      const bool next_b =
          brute_offset(to.offset, b, x, e, es) == brute_offset(to.offset, b, x, e - 1, es) + es;
      runs_one += next_a ? 0 : 1;
      runs_two += next_a && next_b ? 0 : 1;
    }
    EXPECT_EQ(one.runs(first, count), runs_one) << "case " << i;
    EXPECT_EQ(two.runs(first, count), runs_two) << "case " << i;
    std::int64_t at = first;
    std::int64_t walked = 0;
    two.for_each_run(first, count, [&](std::int64_t index, std::int64_t elements) {
      EXPECT_EQ(index, at);
      for (std::int64_t k = 1; k < elements; ++k) {
        EXPECT_EQ(two.offset_of(0, index + k), two.offset_of(0, index) + k * es);
        EXPECT_EQ(two.offset_of(1, index + k), two.offset_of(1, index) + k * es);
      }
      at += elements;
      ++walked;
    });
    EXPECT_EQ(at, first + count);
    EXPECT_EQ(walked, runs_two);
  }
}

// A column of a [10, 6] fp32 array is ten runs of one element, 24 bytes apart; the whole array is
// one run.
TEST(Walk, AColumnIsOneRunPerRowAndAWholeArrayOneRun) {
  const Box array{{0, 0}, {10, 6}};
  const Box column{{0, 2}, {10, 1}};
  const Walk w(Array{.offset = 100, .box = &array}, column, 4);
  EXPECT_EQ(w.runs(0, 10), 10);
  EXPECT_EQ(w.offset_of(0, 0), 100 + 2 * 4);
  EXPECT_EQ(w.offset_of(0, 1), 100 + (6 + 2) * 4);
  const Walk whole(Array{.offset = 0, .box = &array}, array, 4);
  EXPECT_EQ(whole.dims(), 1);
  EXPECT_EQ(whole.runs(0, 60), 1);
}

}  // namespace
}  // namespace refit::lowering
