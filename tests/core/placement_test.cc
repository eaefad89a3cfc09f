#include "refit/core/placement.h"

#include <gtest/gtest.h>

#include "error_code.h"

namespace refit {
namespace {

TEST(Placement, ParsesShortAndLongForms) {
  EXPECT_EQ(parse_placement("S0").value(), Placement::shard(0));
  EXPECT_EQ(parse_placement("s12").value(), Placement::shard(12));
  EXPECT_EQ(parse_placement("Shard(2)").value(), Placement::shard(2));
  EXPECT_EQ(parse_placement("R").value(), Placement::replicate());
  EXPECT_EQ(parse_placement(" replicate() ").value(), Placement::replicate());
  EXPECT_EQ(Placement::shard(3).to_string(), "S3");
}

TEST(Placement, AnExplicitChunkRoundTrips) {
  EXPECT_EQ(parse_placement("S0:128").value(), Placement::shard(0, 128));
  EXPECT_EQ(Placement::shard(1, 64).to_string(), "S1:64");
  EXPECT_EQ(parse_placement(Placement::shard(2, 7).to_string()).value(), Placement::shard(2, 7));
  EXPECT_EQ(testing::error_code(parse_placement("S0:0")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(parse_placement("S0:")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(parse_placement("S0:-4")), ErrorCode::kParse);
}

TEST(Placement, AShiftedChunkRoundTrips) {
  EXPECT_EQ(parse_placement("S0:192@-512").value(), Placement::shard(0, 192, -512));
  EXPECT_EQ(Placement::shard(1, 3, -8).to_string(), "S1:3@-8");
  EXPECT_EQ(Placement::shard(1, 3, 0).to_string(), "S1:3");
  EXPECT_EQ(parse_placement(Placement::shard(2, 7, -1).to_string()).value(), Placement::shard(2, 7, -1));
  EXPECT_EQ(testing::error_code(parse_placement("S0:3@4")), ErrorCode::kParse);  // after the dim's start
  EXPECT_EQ(testing::error_code(parse_placement("S0:3@")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(parse_placement("S0@-3")), ErrorCode::kParse);  // a start needs a chunk
}

TEST(Placement, RejectsGarbageNamingTheEntry) {
  EXPECT_EQ(testing::error_code(parse_placement("S")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(parse_placement("S-1")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(parse_placement("X0")), ErrorCode::kParse);
  auto list = parse_placements("S0,Q");
  ASSERT_FALSE(list);
  EXPECT_EQ(list.error().code, ErrorCode::kParse);
  EXPECT_NE(list.error().message.find("placements[1]"), std::string::npos);
  EXPECT_EQ(parse_placements("S0,R,S1").value().size(), 3u);
}

TEST(Placement, NumbersPastTheIntegersAreRefusedNotTakenAsZero) {
  // std::from_chars leaves the value as it was (0) when the digits overflow: a start of
  // -99999999999999999999 was once read as S0:32, silently.
  EXPECT_EQ(testing::error_code(parse_placement("S0:32@-99999999999999999999")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(parse_placement("S0:99999999999999999999")), ErrorCode::kParse);
  EXPECT_EQ(testing::error_code(parse_placement("S99999999999999999999")), ErrorCode::kParse);
  EXPECT_EQ(parse_placement("S0:32@-9223372036854775807").value(),
            Placement::shard(0, 32, -9223372036854775807));
}

}  // namespace
}  // namespace refit
