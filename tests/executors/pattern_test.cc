// The verification pattern: element i of tensor t holds the low bytes of splitmix64(t, i), so a
// box filled on one rank verifies on another, and any wrong byte is reported by its element.
#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "error_code.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/pattern.h"
#include "test_problems.h"

namespace refit {
namespace {

TEST(Pattern, FilledBoxVerifiesForEveryElementSize) {
  const Shape shape{5, 7, 3};
  const Box box{{1, 2, 0}, {3, 4, 3}};  // 36 elements
  for (const std::int64_t size : {1, 2, 4, 8}) {
    std::vector<std::byte> data(static_cast<std::size_t>(box.volume() * size));
    fill_pattern(4, shape, box, size, data);
    EXPECT_TRUE(verify_pattern(4, shape, box, size, data)) << "element size " << size;
  }
}

// Element (1, 2, 0) of a [5, 7, 3] tensor has global row-major index 1*21 + 2*3 + 0 = 27.
TEST(Pattern, FirstElementOfTheBoxHoldsItsGlobalIndexValue) {
  const Shape shape{5, 7, 3};
  const Box box{{1, 2, 0}, {1, 1, 1}};
  std::vector<std::byte> data(8);
  fill_pattern(3, shape, box, 8, data);
  std::uint64_t v = 0;
  std::memcpy(&v, data.data(), 8);
  EXPECT_EQ(v, pattern_value(3, 27));
}

// Byte 2 of element 5 of the box [1:3, 2:6, 0:3] is corrupted: box element 5 is (1, 3, 2), global
// index 1*21 + 3*3 + 2 = 32.
TEST(Pattern, ACorruptedByteNamesItsElement) {
  const Shape shape{5, 7, 3};
  const Box box{{1, 2, 0}, {3, 4, 3}};
  std::vector<std::byte> data(static_cast<std::size_t>(box.volume() * 4));
  fill_pattern(0, shape, box, 4, data);
  data[5 * 4 + 2] ^= std::byte{0x40};
  const auto r = verify_pattern(0, shape, box, 4, data);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kRuntime);
  EXPECT_NE(r.error().message.find("element 32 "), std::string::npos) << r.error().message;
}

TEST(Pattern, ABufferSmallerThanItsBoxIsAMismatch) {
  const Shape shape{4, 4};
  const Box box{{0, 0}, {2, 4}};
  std::vector<std::byte> data(7 * 2);
  const auto r = verify_pattern(0, shape, box, 2, data);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kMismatch);
  EXPECT_NE(r.error().message.find("buffer of 14 bytes"), std::string::npos) << r.error().message;
}

TEST(Pattern, TensorsDifferSoAMixUpShows) {
  const Shape shape{64};
  const Box box{{0}, {64}};
  std::vector<std::byte> data(64 * 2);
  fill_pattern(1, shape, box, 2, data);
  EXPECT_EQ(testing::error_code(verify_pattern(2, shape, box, 2, data)), ErrorCode::kRuntime);
}

// Destination shards start zeroed; only the pattern makes them verify.
TEST(HostShards, SourcesCarryThePatternAndDestinationsStartZero) {
  const Shape shape{6, 4};
  const auto problem =
      ReshardProblem::make({testing::make_reshard(
                               "w", shape, testing::make_layout(shape, {2}, testing::rank_range(0, 2), "S0"),
                               testing::make_layout(shape, {1}, testing::rank_range(2, 1), "R"))},
                           2, 1)
          .value();
  const auto source = HostShards::allocate(problem, Rank{1});
  ASSERT_EQ(source.buffers().sources.size(), 1u);
  EXPECT_EQ(source.buffers().sources[0].box, (Box{{3, 0}, {3, 4}}));
  EXPECT_TRUE(
      verify_pattern(0, shape, source.buffers().sources[0].box, 2, source.buffers().sources[0].bytes));
  const auto destination = HostShards::allocate(problem, Rank{2});
  ASSERT_EQ(destination.buffers().destinations.size(), 1u);
  const auto r = destination.verify(problem);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kRuntime);
  EXPECT_NE(r.error().message.find("tensor 'w'"), std::string::npos) << r.error().message;
}

}  // namespace
}  // namespace refit
