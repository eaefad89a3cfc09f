#include <gtest/gtest.h>

#include "error_code.h"

#include "refit/planner/plan.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

// A 4x4 bf16 tensor: rows [0,2) on rank 0, [2,4) on rank 1; columns [0,2) on rank 2, [2,4) on 3.
// Each destination needs two 2x2 pieces of 8 bytes.
class ValidateTest : public ::testing::Test {
 protected:
  ReshardProblem problem =
      ReshardProblem::make(
          {testing::make_reshard("w", {4, 4}, make_layout({4, 4}, {2}, rank_range(0, 2), "S0"),
                                 make_layout({4, 4}, {2}, rank_range(2, 2), "S1"))},
          2, 2)
          .value();

  static Segment seg(Box b, std::int32_t via = kFromSourceShard) {
    return Segment{.tensor = 0, .box = std::move(b), .via = via};
  }
  static Transfer xfer(std::int32_t id, int from, int to, std::vector<Segment> s) {
    Bytes bytes{0};
    for (const auto& x : s) bytes += Bytes{x.box.volume() * 2};
    return Transfer{.id = id,
                    .sender = Rank{from},
                    .receiver = Rank{to},
                    .link = LinkKind::kNetwork,
                    .segments = std::move(s),
                    .bytes = bytes,
                    .chunk = Bytes{1 << 20}};
  }
  Plan hand_plan() const {
    return Plan{.strategy = "hand",
                .tensors = {problem.tensors()[0].tensor},
                .source_ranks = 2,
                .destination_ranks = 2,
                .transfers = {}};
  }
  Plan good() const {
    Plan p = hand_plan();
    p.transfers = {xfer(0, 0, 2, {seg({{0, 0}, {2, 2}})}), xfer(1, 1, 2, {seg({{2, 0}, {2, 2}})}),
                   xfer(2, 0, 3, {seg({{0, 2}, {2, 2}})}), xfer(3, 1, 3, {seg({{2, 2}, {2, 2}})})};
    return p;
  }
  static std::string error_of(const Result<void>& r) { return r ? std::string() : r.error().message; }
};

TEST_F(ValidateTest, HandWrittenPlanIsValid) {
  EXPECT_TRUE(validate(good(), problem)) << error_of(validate(good(), problem));
}

TEST_F(ValidateTest, MissingPieceIsAGap) {
  auto p = good();
  p.transfers.pop_back();
  // Rank 3 gets 4 of its 8 elements.
  const auto r = validate(p, problem);
  EXPECT_EQ(testing::error_code(r), ErrorCode::kMismatch);
  EXPECT_NE(error_of(r).find("destination rank 3"), std::string::npos);
}

TEST_F(ValidateTest, OverlappingPiecesAreWrittenTwice) {
  auto p = good();
  p.transfers.push_back(xfer(4, 0, 2, {seg({{1, 0}, {1, 2}})}));
  const auto r = validate(p, problem);
  EXPECT_EQ(testing::error_code(r), ErrorCode::kMismatch);
  EXPECT_NE(error_of(r).find("written twice"), std::string::npos);
}

TEST_F(ValidateTest, SenderMustHoldWhatItSends) {
  auto p = good();
  p.transfers[0].sender = Rank{1};  // rank 1 holds rows [2,4), not [0,2)
  const auto r = validate(p, problem);
  EXPECT_EQ(testing::error_code(r), ErrorCode::kMismatch);
  EXPECT_NE(error_of(r).find("without holding"), std::string::npos);
}

TEST_F(ValidateTest, RelayMustForwardWhatItReceived) {
  auto p = good();
  // Rank 2 forwards rows [0,2) x cols [2,4) to rank 3, but it received cols [0,2) only.
  p.transfers[2] = xfer(2, 2, 3, {seg({{0, 2}, {2, 2}}, 0)});
  const auto partial = validate(p, problem);
  EXPECT_EQ(testing::error_code(partial), ErrorCode::kInvalidArgument);
  EXPECT_NE(error_of(partial).find("did not deliver"), std::string::npos);
  // A relay of a later transfer is refused too.
  p.transfers[2] = xfer(2, 2, 3, {seg({{0, 2}, {2, 2}}, 3)});
  const auto later = validate(p, problem);
  EXPECT_EQ(testing::error_code(later), ErrorCode::kInvalidArgument);
  EXPECT_NE(error_of(later).find("earlier"), std::string::npos);
}

TEST_F(ValidateTest, RelayOfReceivedDataIsValid) {
  // Rank 2 receives the whole top half [0,2)x[0,4) from rank 0 and forwards cols [2,4) to rank 3.
  Plan p = hand_plan();
  p.transfers = {xfer(0, 0, 2, {seg({{0, 0}, {2, 4}})}), xfer(1, 1, 2, {seg({{2, 0}, {2, 2}})}),
                 xfer(2, 2, 3, {seg({{0, 2}, {2, 2}}, 0)}), xfer(3, 1, 3, {seg({{2, 2}, {2, 2}})})};
  EXPECT_TRUE(validate(p, problem)) << error_of(validate(p, problem));
}

TEST_F(ValidateTest, BytesMustAddUpAndRanksExist) {
  auto p = good();
  p.transfers[1].bytes = Bytes{7};
  const auto bytes = validate(p, problem);
  EXPECT_EQ(testing::error_code(bytes), ErrorCode::kInvalidArgument);
  EXPECT_NE(error_of(bytes).find("add up"), std::string::npos);
  p = good();
  p.transfers[1].receiver = Rank{9};
  const auto rank = validate(p, problem);
  EXPECT_EQ(testing::error_code(rank), ErrorCode::kOutOfRange);
  EXPECT_NE(error_of(rank).find("rank 9"), std::string::npos);
}

TEST_F(ValidateTest, SchedulesListSendsAndReceivesInPlanOrder) {
  const auto s = schedules(good());
  EXPECT_EQ(s[0].sends, (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(s[3].receives, (std::vector<std::int32_t>{2, 3}));
}

}  // namespace
}  // namespace refit
