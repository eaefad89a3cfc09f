// RowMap against brute force: for random segments, views and clips, packing any byte range of
// the segment through the row map gives exactly the bytes an element-by-element walk of the
// segment (row-major) would produce for the elements inside the clip, and unpacking writes them
// back to the same places and nowhere else.
#include <gtest/gtest.h>

#include <numeric>
#include <random>
#include <vector>

#include "strided_copy.h"

namespace refit::ucx_detail {
namespace {

struct Case {
  Box view_box;
  Box segment;
  Box clip;
  std::int64_t element = 1;
};

Box random_sub_box(const Box& outer, std::mt19937_64& rng) {
  Box b = outer;
  for (std::size_t d = 0; d < outer.rank(); ++d) {
    const auto lo = std::uniform_int_distribution<std::int64_t>(0, outer.extent[d] - 1)(rng);
    const auto hi = std::uniform_int_distribution<std::int64_t>(lo + 1, outer.extent[d])(rng);
    b.offset[d] = outer.offset[d] + lo;
    b.extent[d] = hi - lo;
  }
  return b;
}

Case random_case(std::mt19937_64& rng) {
  const auto dims = std::uniform_int_distribution<std::size_t>(1, 4)(rng);
  Box view{Shape(dims), Shape(dims)};
  for (std::size_t d = 0; d < dims; ++d) {
    view.offset[d] = std::uniform_int_distribution<std::int64_t>(0, 5)(rng);
    view.extent[d] = std::uniform_int_distribution<std::int64_t>(1, 6)(rng);
  }
  // Often whole: that is where rows merge.
  const bool whole_segment = std::uniform_int_distribution<int>(0, 2)(rng) == 0;
  Case c{view,
         whole_segment ? view : random_sub_box(view, rng),
         {},
         std::int64_t{1} << std::uniform_int_distribution<int>(0, 3)(rng)};
  c.clip = std::uniform_int_distribution<int>(0, 1)(rng) == 0 ? c.segment : random_sub_box(c.segment, rng);
  return c;
}

// Byte offset of each element of `segment` (row-major) in the view, or -1 outside the clip.
std::vector<std::int64_t> brute_force(const Case& c) {
  std::vector<std::int64_t> out;
  const auto dims = c.segment.rank();
  Shape p = c.segment.offset;
  for (std::int64_t n = 0; n < c.segment.volume(); ++n) {
    std::int64_t at = 0;
    for (std::size_t d = 0; d < dims; ++d) at = at * c.view_box.extent[d] + (p[d] - c.view_box.offset[d]);
    out.push_back(c.clip.contains_point(p) ? at * c.element : -1);
    for (std::size_t d = dims; d-- > 0;) {
      if (++p[d] < c.segment.offset[d] + c.segment.extent[d]) break;
      p[d] = c.segment.offset[d];
    }
  }
  return out;
}

TEST(StridedCopy, PackAndUnpackOfAnyByteRangeMatchBruteForce) {
  std::mt19937_64 rng(17);
  for (int i = 0; i < 3000; ++i) {
    const Case c = random_case(rng);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": view " << c.view_box.to_string() << " segment "
                                      << c.segment.to_string() << " clip " << c.clip.to_string());
    const auto offsets = brute_force(c);
    const auto bytes = c.segment.volume() * c.element;
    std::vector<std::byte> region(static_cast<std::size_t>(16 + c.view_box.volume() * c.element));
    for (std::size_t k = 0; k < region.size(); ++k) region[k] = static_cast<std::byte>(k * 7 + 1);
    std::byte* regions[] = {region.data()};
    const RowMap map(c.segment, View{0, 16, c.view_box, c.element}, c.clip);
    EXPECT_EQ(map.covers_segment(), c.clip == c.segment);
    const auto begin = std::uniform_int_distribution<std::int64_t>(0, bytes - 1)(rng);
    const auto end = std::uniform_int_distribution<std::int64_t>(begin + 1, bytes)(rng);
    std::vector<std::byte> packed(static_cast<std::size_t>(end - begin), std::byte{0xEE});
    pack(map, begin, end, regions, packed.data());
    for (std::int64_t b = begin; b < end; ++b) {
      const auto at = offsets[static_cast<std::size_t>(b / c.element)];
      const auto expected =
          at < 0 ? std::byte{0xEE} : region[static_cast<std::size_t>(16 + at + b % c.element)];
      ASSERT_EQ(packed[static_cast<std::size_t>(b - begin)], expected) << "byte " << b;
    }
    // Unpacking distinct bytes touches exactly the clipped elements' bytes of the range.
    std::vector<std::byte> marks(packed.size(), std::byte{0x5A});
    const auto before = region;
    unpack(map, begin, end, marks.data(), regions);
    std::int64_t changed = 0;
    for (std::size_t k = 0; k < region.size(); ++k) changed += region[k] != before[k] ? 1 : 0;
    std::int64_t inside = 0;
    for (std::int64_t b = begin; b < end; ++b)
      if (offsets[static_cast<std::size_t>(b / c.element)] >= 0 &&
          before[static_cast<std::size_t>(16 + offsets[static_cast<std::size_t>(b / c.element)] +
                                          b % c.element)] != std::byte{0x5A})
        ++inside;
    EXPECT_EQ(changed, inside);
  }
}

// A [4, 6] view holding the segment [1:3, 0:6] whole: rows merge into one 48-byte run of fp32.
TEST(StridedCopy, WholeRowsMergeIntoOneRun) {
  const Box view{{0, 0}, {4, 6}};
  const Box segment{{1, 0}, {2, 6}};
  const RowMap map(segment, View{2, 100, view, 4}, segment);
  std::vector<ucx_detail::Run> runs;
  map.for_each_run(0, 48, [&](const ucx_detail::Run& r) { runs.push_back(r); });
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_EQ(runs[0], (ucx_detail::Run{0, 2, 100 + 24, 48}));
}

}  // namespace
}  // namespace refit::ucx_detail
