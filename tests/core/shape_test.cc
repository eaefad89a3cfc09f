// Shape against std::vector<std::int64_t>, the brute-force reference it stands in for: random
// pushes, resizes, copies and moves across the inline limit (4 values) give the same values,
// sizes and comparisons, and JSON reads and writes it as the vector's array.
#include "refit/core/shape.h"

#include <random>
#include <utility>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace refit {
namespace {

void expect_same(const Shape& s, const std::vector<std::int64_t>& v) {
  ASSERT_EQ(s.size(), v.size());
  EXPECT_TRUE(std::equal(s.begin(), s.end(), v.begin()));
}

TEST(Shape, BehavesAsAVectorAcrossTheInlineLimit) {
  std::mt19937 rng(7);
  std::uniform_int_distribution<> op(0, 5), value(-3, 3), size(0, 10);
  Shape s;
  std::vector<std::int64_t> v;
  for (int step = 0; step < 5000; ++step) {
    switch (op(rng)) {
      case 0:
      case 1: {
        const auto x = value(rng);
        s.push_back(x);
        v.push_back(x);
        break;
      }
      case 2: {
        const auto n = static_cast<std::size_t>(size(rng));
        const auto x = value(rng);
        s.resize(n, x);
        v.resize(n, x);
        break;
      }
      case 3: {  // a copy compares as the vectors do, and survives its source's change
        const Shape copy = s;
        const auto before = v;
        s.push_back(1);
        v.push_back(1);
        expect_same(copy, before);
        EXPECT_EQ(copy < s, before < v);
        EXPECT_EQ(copy == s, before == v);
        break;
      }
      case 4: {  // moved away and back: the source is left empty
        Shape moved = std::move(s);
        EXPECT_TRUE(s.empty());  // as shape.h says a moved-from shape is
        s = std::move(moved);
        break;
      }
      default:
        if (size(rng) == 0) {
          s.clear();
          v.clear();
        }
    }
    expect_same(s, v);
  }
}

TEST(Shape, ReadsAndWritesJsonAsTheVector) {
  // [1, 2, 3, 4, 5] spills past the 4 inline values; a non-array fails as the vector's read does.
  const nlohmann::json j = nlohmann::json::parse("[1, 2, 3, 4, 5]");
  const auto s = j.get<Shape>();
  expect_same(s, {1, 2, 3, 4, 5});
  EXPECT_EQ(nlohmann::json(s), j);
  EXPECT_THROW(nlohmann::json::parse("{\"a\": 1}").get<Shape>(), nlohmann::json::type_error);
}

}  // namespace
}  // namespace refit
