// Where the plan model cuts transfers (piece_cuts.h), on plans built by hand with chunks of
// 1 MiB: the grants of a pair's window, the anchors of a pipelined relay, and the issue order of
// calls.
#include "piece_cuts.h"

#include <gtest/gtest.h>

#include "plan_tasks_fixture.h"

namespace refit::sim {
namespace {

using testing::plan_of;
using testing::transfer;

std::vector<std::int64_t> ends(const PieceCuts& cuts, const Transfer& t) {
  std::vector<std::int64_t> out;
  cuts.ends(t, out);
  return out;
}

TEST(PieceCuts, APairsWindowGrantsALaterTransferAtTheChunkWindowBeforeItsFirst) {
  // One pair, 6 then 2 chunks. Window 4: the second transfer's first chunk (pair chunk 6) waits
  // for pair chunk 6 - 4 = 2, the first transfer's third: grant {0, 3}, and the first transfer is
  // cut there (ends 3, 6). Window 1: chunk 5, the first's last: grant {0, 6}, no extra cut.
  // Window 0, no calls: no streams, no grants, each transfer one piece.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 6), transfer(1, 0, 1, 6, 2)}, 8);
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging).value();
  const auto four = PieceCuts::make(lowered, nullptr, {}, 4).value();
  EXPECT_EQ(four.streams(), 1);
  EXPECT_EQ(four.stream(0), 0);
  EXPECT_EQ(four.stream(1), 0);
  EXPECT_EQ(four.grant(1).holder, 0);
  EXPECT_EQ(four.grant(1).chunks, 3);
  EXPECT_EQ(four.grant(0).holder, -1);
  EXPECT_EQ(ends(four, plan.transfers[0]), (std::vector<std::int64_t>{3, 6}));
  EXPECT_EQ(ends(four, plan.transfers[1]), (std::vector<std::int64_t>{2}));
  const auto one = PieceCuts::make(lowered, nullptr, {}, 1).value();
  EXPECT_EQ(one.grant(1).chunks, 6);
  EXPECT_EQ(ends(one, plan.transfers[0]), (std::vector<std::int64_t>{6}));
  const auto none = PieceCuts::make(lowered, nullptr, {}, 0).value();
  EXPECT_EQ(none.streams(), 0);
  EXPECT_EQ(none.stream(1), -1);
  EXPECT_EQ(none.grant(1).holder, -1);
  EXPECT_EQ(ends(none, plan.transfers[0]), (std::vector<std::int64_t>{6}));
}

std::vector<std::tuple<std::int64_t, std::int32_t, std::int64_t>> waits(const PieceCuts& cuts,
                                                                        std::int32_t t) {
  std::vector<std::tuple<std::int64_t, std::int32_t, std::int64_t>> out;
  for (const auto& w : cuts.relay_waits(t)) out.emplace_back(w.from, w.upstream, w.chunks);
  return out;
}

TEST(PieceCuts, APipelinedRelayWaitsForTheUpstreamChunksItsHeadAndLastChunkForward) {
  // Rank 0 sends 4 chunks to rank 1, which forwards them to rank 2. The relay's head (chunk 0)
  // forwards upstream chunk 0: it waits for 1 chunk; its last chunk (3) upstream chunk 3: it
  // waits for 4. The upstream is cut after its head and where the relay waits (1, 4); the relay
  // after its head, before its last head and at its end (1, 3, 4).
  const auto plan = plan_of({transfer(0, 0, 1, 0, 4), transfer(1, 1, 2, 0, 4, 0)}, 4);
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging).value();
  const auto cuts = PieceCuts::make(lowered, nullptr, {}, 0).value();
  EXPECT_TRUE(cuts.relay_waits(0).empty());
  using W = std::tuple<std::int64_t, std::int32_t, std::int64_t>;
  EXPECT_EQ(waits(cuts, 1), (std::vector<W>{{0, 0, 1}, {3, 0, 4}}));
  EXPECT_EQ(ends(cuts, plan.transfers[0]), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(ends(cuts, plan.transfers[1]), (std::vector<std::int64_t>{1, 3, 4}));
  ASSERT_EQ(cuts.upstreams(1).size(), 1U);
  EXPECT_EQ(cuts.upstreams(1)[0], 0);
}

TEST(PieceCuts, ARelayOfTwoUpstreamsPipelinesFromEachAndEndsAfterBoth) {
  // Rank 0 sends rows of 2 chunks to rank 1 twice (transfers 0 and 1); rank 1 forwards transfer
  // 1's rows, then transfer 0's, in one relay of 4 chunks. Chunks 0 and 1 forward transfer 1's
  // chunks 1 and 2, chunks 2 and 3 transfer 0's. Its head waits (from, upstream, chunks) for
  // (0, 1, 1); the piece from chunk 1, the first to forward all of transfer 1, for (1, 1, 2); the
  // piece from chunk 3, the first to forward all of transfer 0, for (3, 0, 2). Before, a relay of
  // two upstreams waited for both to end before its first chunk.
  Transfer relay = transfer(2, 1, 2, 0, 4);
  relay.segments = {Segment{0, Box{{2 * 1024, 0}, {2 * 1024, 512}}, 1},
                    Segment{0, Box{{0, 0}, {2 * 1024, 512}}, 0}};
  const auto plan = plan_of({transfer(0, 0, 1, 0, 2), transfer(1, 0, 1, 2, 2), relay}, 4);
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging).value();
  const auto cuts = PieceCuts::make(lowered, nullptr, {}, 0).value();
  using W = std::tuple<std::int64_t, std::int32_t, std::int64_t>;
  EXPECT_EQ(waits(cuts, 2), (std::vector<W>{{0, 1, 1}, {1, 1, 2}, {3, 0, 2}}));
  EXPECT_EQ(ends(cuts, plan.transfers[0]), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(ends(cuts, plan.transfers[1]), (std::vector<std::int64_t>{1, 2}));
  EXPECT_EQ(ends(cuts, plan.transfers[2]), (std::vector<std::int64_t>{1, 3, 4}));
}

TEST(PieceCuts, ARelayReadingItsUpstreamOutOfOrderWaitsWhereItFirstNeedsAllOfIt) {
  // Rank 0 sends 4 chunks to rank 1, which forwards rows [2, 4) MiB, then [0, 2): relay chunks
  // 0..3 forward upstream chunks 2, 3, 0, 1 (waits of 3, 4, 1, 2 chunks). Its head waits for 3;
  // chunk 1 is the first to need all 4, and the pair's chunks go in order, so the piece from it
  // waits for the upstream's end: (1, 0, 4). Waiting only where the last chunk reads (2 chunks),
  // the relay ended before the rows it forwards first had landed.
  Transfer relay = transfer(1, 1, 2, 0, 4);
  relay.segments = {Segment{0, Box{{2 * 1024, 0}, {2 * 1024, 512}}, 0},
                    Segment{0, Box{{0, 0}, {2 * 1024, 512}}, 0}};
  const auto plan = plan_of({transfer(0, 0, 1, 0, 4), relay}, 4);
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging).value();
  const auto cuts = PieceCuts::make(lowered, nullptr, {}, 0).value();
  using W = std::tuple<std::int64_t, std::int32_t, std::int64_t>;
  EXPECT_EQ(waits(cuts, 1), (std::vector<W>{{0, 0, 3}, {1, 0, 4}}));
  EXPECT_EQ(ends(cuts, plan.transfers[0]), (std::vector<std::int64_t>{1, 3, 4}));
  EXPECT_EQ(ends(cuts, plan.transfers[1]), (std::vector<std::int64_t>{1, 4}));
}

TEST(PieceCuts, TransfersRunInCallOrderThenPlanOrderAndUncalledOnesNot) {
  // Three transfers; call 0 moves transfer 2, call 1 transfer 0; no call moves transfer 1.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1), transfer(1, 0, 2, 0, 1), transfer(2, 0, 1, 1, 1)}, 2);
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging).value();
  const CallSchedule calls{
      .calls = {Call{.label = "a", .transfers = {2}}, Call{.label = "b", .transfers = {0}}}};
  const std::vector<std::int32_t> call_of{1, -1, 0};
  const auto cuts = PieceCuts::make(lowered, &calls, call_of, 0).value();
  EXPECT_EQ(std::vector<std::int32_t>(cuts.order().begin(), cuts.order().end()),
            (std::vector<std::int32_t>{2, 0}));
}

}  // namespace
}  // namespace refit::sim
