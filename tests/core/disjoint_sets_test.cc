#include "refit/core/disjoint_sets.h"

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>

namespace refit {
namespace {

// The brute-force reference: two items are in one set exactly when a path of joined pairs links
// them, found by a flood fill from each item over the pairs given.
std::vector<std::size_t> flood_labels(std::size_t n,
                                      const std::vector<std::pair<std::size_t, std::size_t>>& pairs) {
  std::vector<std::vector<std::size_t>> next(n);
  for (const auto& [a, b] : pairs) {
    next[a].push_back(b);
    next[b].push_back(a);
  }
  std::vector<std::size_t> label(n, n);
  for (std::size_t start = 0; start < n; ++start) {
    if (label[start] != n) continue;
    std::vector<std::size_t> todo{start};
    label[start] = start;
    while (!todo.empty()) {
      const auto x = todo.back();
      todo.pop_back();
      for (const auto y : next[x])
        if (label[y] == n) label[y] = start, todo.push_back(y);
    }
  }
  return label;
}

TEST(DisjointSets, EveryItemStartsAlone) {
  DisjointSets sets(4);
  EXPECT_EQ(sets.size(), 4U);
  for (std::size_t i = 0; i < 4; ++i) EXPECT_EQ(sets.find(i), i);
}

// Joining {0,1} and {2,3}, then 1 with 3, puts all four in one set; 4 stays alone.
TEST(DisjointSets, JoinsAreTransitive) {
  DisjointSets sets(5);
  sets.join(0, 1);
  sets.join(2, 3);
  EXPECT_NE(sets.find(0), sets.find(2));
  sets.join(1, 3);
  for (std::size_t i = 1; i < 4; ++i) EXPECT_EQ(sets.find(i), sets.find(0));
  EXPECT_NE(sets.find(4), sets.find(0));
}

// Property: over random relations, find() agrees with the flood fill on which pairs share a set.
TEST(DisjointSets, AgreesWithAFloodFillOnRandomRelations) {
  std::mt19937_64 rng(2026);
  for (int trial = 0; trial < 300; ++trial) {
    const std::size_t n = 1 + rng() % 40;
    std::vector<std::pair<std::size_t, std::size_t>> pairs(rng() % (2 * n));
    for (auto& [a, b] : pairs) a = rng() % n, b = rng() % n;
    DisjointSets sets(n);
    for (const auto& [a, b] : pairs) sets.join(a, b);
    const auto label = flood_labels(n, pairs);
    for (std::size_t a = 0; a < n; ++a)
      for (std::size_t b = 0; b < n; ++b)
        ASSERT_EQ(sets.find(a) == sets.find(b), label[a] == label[b])
            << "trial " << trial << ", items " << a << ", " << b;
  }
}

}  // namespace
}  // namespace refit
