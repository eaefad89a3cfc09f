// UpstreamSegments against a brute force: the segment holding a relay's box is the first of its
// message with the same tensor and the very box, else the first of that tensor whose box contains
// it, else none.
#include <random>

#include <gtest/gtest.h>

#include "upstream_segments.h"

namespace refit::planner_detail {
namespace {

std::optional<std::size_t> brute_force(std::span<const Segment> segments, const Segment& s) {
  for (std::size_t k = 0; k < segments.size(); ++k)
    if (segments[k].tensor == s.tensor && segments[k].box == s.box) return k;
  for (std::size_t k = 0; k < segments.size(); ++k)
    if (segments[k].tensor == s.tensor && segments[k].box.contains(s.box)) return k;
  return std::nullopt;
}

Box random_box(std::mt19937& rng) {
  std::uniform_int_distribution<std::int64_t> at(0, 3), size(1, 3);
  return Box{.offset = {at(rng), at(rng)}, .extent = {size(rng), size(rng)}};
}

TEST(UpstreamSegments, FindsTheSegmentABruteForceFinds) {
  for (std::uint32_t seed = 0; seed < 30; ++seed) {
    std::mt19937 rng(seed);
    std::uniform_int_distribution<std::uint32_t> tensor(0, 2);
    std::vector<std::vector<Segment>> messages(6);
    UpstreamSegments index;
    for (std::size_t m = 0; m < messages.size(); ++m) {
      for (int k = 0; k < 8; ++k)
        messages[m].push_back(Segment{.tensor = tensor(rng), .box = random_box(rng)});
      index.add(static_cast<std::int32_t>(m), messages[m]);
    }
    for (int probe = 0; probe < 300; ++probe) {
      const auto m = static_cast<std::int32_t>(rng() % messages.size());
      const auto& segments = messages[static_cast<std::size_t>(m)];
      // Half the probes are a segment of the message itself (a relay of it), half anything.
      const Segment s = probe % 2 ? segments[rng() % segments.size()]
                                  : Segment{.tensor = tensor(rng), .box = random_box(rng)};
      EXPECT_EQ(index.holding(m, segments, s), brute_force(segments, s))
          << "seed " << seed << " probe " << probe;
    }
  }
}

TEST(UpstreamSegments, ARowSlabIsHeldByTheSegmentItWasCutFrom) {
  // A relay of rows [2, 4) of a [0:8, 0:5] segment: contained, not equal.
  const std::vector<Segment> upstream{Segment{.tensor = 1, .box = Box{.offset = {0, 0}, .extent = {8, 5}}},
                                      Segment{.tensor = 0, .box = Box{.offset = {0, 0}, .extent = {8, 5}}}};
  UpstreamSegments index;
  index.add(3, upstream);
  EXPECT_EQ(index.holding(3, upstream, Segment{.tensor = 0, .box = Box{.offset = {2, 0}, .extent = {2, 5}}}),
            1u);
  EXPECT_EQ(index.holding(3, upstream, Segment{.tensor = 2, .box = Box{.offset = {2, 0}, .extent = {2, 5}}}),
            std::nullopt);
}

}  // namespace
}  // namespace refit::planner_detail
