// FirstSeenIds against a brute force: a key's id is the number of distinct keys seen before its
// first appearance, and find() knows exactly the keys inserted so far.
#include <map>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "first_seen_ids.h"

namespace refit::planner_detail {
namespace {

struct Triple {
  std::uint32_t a = 0, b = 0;
  std::int32_t c = 0;
  bool operator==(const Triple&) const = default;
  auto operator<=>(const Triple&) const = default;
};
struct TripleHash {
  std::uint64_t operator()(const Triple& k) const { return (std::uint64_t{k.a} << 40) ^ (k.b << 20) ^ k.c; }
};
// Every key in one home slot: the probing alone must tell them apart.
struct CollidingHash {
  std::uint64_t operator()(const Triple&) const { return 7; }
};

template <class Hash>
void check_against_map(std::uint32_t seed, int inserts, std::uint32_t range) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<std::uint32_t> pick(0, range - 1);
  FirstSeenIds<Triple, Hash> ids;
  std::map<Triple, std::uint32_t> brute;
  for (int i = 0; i < inserts; ++i) {
    const Triple k{.a = pick(rng), .b = pick(rng) % 3, .c = -static_cast<std::int32_t>(pick(rng) % 5)};
    const Triple probe{.a = pick(rng), .b = pick(rng) % 3, .c = -static_cast<std::int32_t>(pick(rng) % 5)};
    const auto known = brute.find(probe);
    const auto found = ids.find(probe);
    ASSERT_EQ(found.has_value(), known != brute.end());
    if (found) EXPECT_EQ(*found, known->second);
    const auto [it, fresh] = brute.try_emplace(k, static_cast<std::uint32_t>(brute.size()));
    EXPECT_EQ(ids.insert(k), std::pair(it->second, fresh));
    ASSERT_EQ(ids.size(), brute.size());
  }
}

TEST(FirstSeenIds, NumbersKeysInOrderOfFirstSightLikeAMap) {
  for (std::uint32_t seed = 0; seed < 20; ++seed) check_against_map<TripleHash>(seed, 5000, 200);
}

TEST(FirstSeenIds, KeysSharingOneHomeSlotStayApart) {
  for (std::uint32_t seed = 0; seed < 5; ++seed) check_against_map<CollidingHash>(seed, 400, 20);
}

TEST(FirstSeenIds, EmptyFindsNothing) {
  const FirstSeenIds<Triple, TripleHash> ids;
  EXPECT_EQ(ids.find(Triple{}), std::nullopt);
  EXPECT_EQ(ids.size(), 0u);
}

}  // namespace
}  // namespace refit::planner_detail
