// Fingerprint tells apart what differs: over many random sequences of values (brute force: every
// pair compared through a set), no two different sequences share a value, a sequence and its
// reverse differ, and a value split differently between shapes does too (lengths are mixed in).
#include "refit/core/fingerprint.h"

#include <random>
#include <set>
#include <vector>

#include <gtest/gtest.h>

namespace refit {
namespace {

std::uint64_t of(const std::vector<std::int64_t>& values) {
  Fingerprint f;
  f.add(values);
  return f.value();
}

TEST(Fingerprint, DifferentSequencesGetDifferentValues) {
  std::mt19937 rng(5);
  std::uniform_int_distribution<> length(0, 6), value(-2, 2);
  std::set<std::vector<std::int64_t>> sequences;
  std::set<std::uint64_t> values;
  for (int i = 0; i < 20000; ++i) {
    std::vector<std::int64_t> s(static_cast<std::size_t>(length(rng)));
    for (auto& v : s) v = value(rng);
    if (sequences.insert(s).second) values.insert(of(s));
  }
  EXPECT_EQ(values.size(), sequences.size());
  EXPECT_NE(of({1, 2, 3}), of({3, 2, 1}));
  Fingerprint split, joined;
  split.add(std::vector<std::int64_t>{1});
  split.add(std::vector<std::int64_t>{2, 3});
  joined.add(std::vector<std::int64_t>{1, 2});
  joined.add(std::vector<std::int64_t>{3});
  EXPECT_NE(split.value(), joined.value());
}

}  // namespace
}  // namespace refit
