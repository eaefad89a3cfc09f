// counting_sorted against std::stable_sort: the same order, equal keys kept in input order, also
// when several passes sort by several keys, least significant first.
#include <algorithm>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "counting_sort.h"

namespace refit::planner_detail {
namespace {

struct Item {
  std::size_t major, minor;
  int id;  // input position: tells a stable order from another
  bool operator==(const Item&) const = default;
};

TEST(CountingSort, MatchesStableSortOnOneKey) {
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(seed);
    const std::size_t keys = 1 + rng() % 30;
    std::vector<Item> items;
    for (int i = 0; i < 200; ++i) items.push_back({.major = rng() % keys, .minor = 0, .id = i});
    auto expected = items;
    std::ranges::stable_sort(expected, {}, &Item::major);
    EXPECT_EQ(counting_sorted(items, keys, [](const Item& x) { return x.major; }), expected);
  }
}

TEST(CountingSort, TwoPassesSortByTwoKeys) {
  for (std::uint32_t seed = 0; seed < 20; ++seed) {
    std::mt19937 rng(seed);
    std::vector<Item> items;
    for (int i = 0; i < 300; ++i) items.push_back({.major = rng() % 5, .minor = rng() % 7, .id = i});
    auto expected = items;
    std::ranges::stable_sort(expected, {}, [](const Item& x) { return std::pair(x.major, x.minor); });
    auto sorted = counting_sorted(items, 7, [](const Item& x) { return x.minor; });
    sorted = counting_sorted(std::move(sorted), 5, [](const Item& x) { return x.major; });
    EXPECT_EQ(sorted, expected);
  }
}

TEST(CountingSort, NothingToSort) {
  EXPECT_TRUE(counting_sorted(std::vector<Item>{}, 0, [](const Item& x) { return x.major; }).empty());
}

}  // namespace
}  // namespace refit::planner_detail
