// rotation_origins against a brute force: a rank's origin is the first rank of its own side
// among the ranks it reaches through messages (either direction), less that side's first rank.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>

#include "rotation_origin.h"

namespace refit::planner_detail {
namespace {

using Pairs = std::vector<std::pair<std::int32_t, std::int32_t>>;

std::vector<std::int32_t> brute_force(const Pairs& pairs, std::int32_t sources, std::int32_t world) {
  std::vector<std::int32_t> out(static_cast<std::size_t>(world));
  for (std::int32_t r = 0; r < world; ++r) {
    std::vector<bool> reached(static_cast<std::size_t>(world), false);
    reached[static_cast<std::size_t>(r)] = true;
    for (bool grew = true; grew;) {  // closure over the messages, both ways
      grew = false;
      for (const auto [a, b] : pairs)
        if (reached[static_cast<std::size_t>(a)] != reached[static_cast<std::size_t>(b)]) {
          reached[static_cast<std::size_t>(a)] = reached[static_cast<std::size_t>(b)] = true;
          grew = true;
        }
    }
    const bool source = r < sources;
    std::int32_t first = r;
    for (std::int32_t q = 0; q < world; ++q)
      if (reached[static_cast<std::size_t>(q)] && (q < sources) == source) first = std::min(first, q);
    out[static_cast<std::size_t>(r)] = first - (source ? 0 : sources);
  }
  return out;
}

TEST(RotationOrigin, TwoShiftedCopiesCountFromTheirOwnFirstRanks) {
  // Training ranks 0..3, inference 4..7: {0,1} -> {4,5} and {2,3} -> {6,7}. The second copy's
  // ranks less their origins (2 and 2) are the first copy's: 0,1 and 4,5.
  const Pairs pairs{{0, 4}, {1, 5}, {0, 5}, {2, 6}, {3, 7}, {2, 7}};
  EXPECT_EQ(rotation_origins(pairs, 4, 8), (std::vector<std::int32_t>{0, 0, 2, 2, 0, 0, 2, 2}));
}

TEST(RotationOrigin, OnePartKeepsPlainRanks) {
  // Everything connected: every origin is 0, so the rotation is the plain s mod n.
  const Pairs pairs{{0, 4}, {1, 4}, {2, 5}, {3, 5}, {4, 5}};
  EXPECT_EQ(rotation_origins(pairs, 4, 6), std::vector<std::int32_t>(6, 0));
}

TEST(RotationOrigin, MatchesBruteForceOnRandomMessages) {
  std::mt19937_64 rng(11);
  for (int i = 0; i < 200; ++i) {
    const auto world = static_cast<std::int32_t>(2 + rng() % 14);
    const auto sources = static_cast<std::int32_t>(1 + rng() % static_cast<std::uint64_t>(world - 1));
    Pairs pairs;
    for (auto k = rng() % 10; k > 0; --k)
      pairs.emplace_back(static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(world)),
                         static_cast<std::int32_t>(rng() % static_cast<std::uint64_t>(world)));
    EXPECT_EQ(rotation_origins(pairs, sources, world), brute_force(pairs, sources, world)) << "case " << i;
  }
}

}  // namespace
}  // namespace refit::planner_detail
