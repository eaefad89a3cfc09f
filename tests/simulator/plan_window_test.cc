// simulate_plan's in-flight model: every (sender, receiver) pair is one stream in plan order,
// whose receiver grants `window` chunks ahead (the UCX executor's in-place grants), and whose
// queue stops at a relay until the data it forwards has landed. Closed-form times on plans
// built by hand, with 1 MiB chunks: U = 1 MiB / NIC bandwidth, alpha = network latency.
#include <gtest/gtest.h>

#include "hand_plans.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::kAlpha;
using testing::kCols;
using testing::kMiB;
using testing::kU;
using testing::make_layout;
using testing::plan_of;
using testing::rank_range;
using testing::replicated;
using testing::transfer;

double predicted(const Plan& plan, const ReshardProblem& p, const PlacedCluster& c, std::int32_t window) {
  PlanSimulationOptions o;
  o.window = window;
  o.rate_tolerance = 0;
  return simulate_plan(plan, p, c, o).value().predicted.value;
}

TEST(PlanWindow, APairPostsAMessageOnceTheChunkWindowAheadHasLanded) {
  // One pair, 8 MiB in two messages of 6 and 2 MiB (6 and 2 chunks), one stream.
  // Window 1: the second message (first chunk: 6) waits for chunk 5, the first message's last,
  // landing at alpha + 6U; its put goes a latency later: 2 alpha + 8U.
  // Window 4: it waits for chunk 2, landed at alpha + 3U; posted a latency later, it is queued
  // before the first message ends (2 alpha + 3U < alpha + 6U) and follows it: alpha + 8U.
  // Window 0 (no queue): both messages at once: alpha + 8U too.
  const auto p = ReshardProblem::make({replicated("w", 8, 0, {Rank{1}})}, 1, 1).value();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto plan = plan_of(p, {transfer(0, 0, 1, 0, 0, 6), transfer(1, 0, 1, 0, 6, 2)});
  EXPECT_NEAR(predicted(plan, p, c, 1), 2 * kAlpha + 8 * kU, 1e-9);
  EXPECT_NEAR(predicted(plan, p, c, 4), kAlpha + 8 * kU, 1e-9);
  EXPECT_NEAR(predicted(plan, p, c, 0), kAlpha + 8 * kU, 1e-9);
}

TEST(PlanWindow, TheWindowIsPerPairNotPerSender) {
  // One sender, two receivers, 4 MiB each. Even with a window of one chunk the two pairs run at
  // once and share the sender's NIC: alpha + 8U (a per-sender window of one message would
  // give 2 alpha + 8U).
  const Shape shape{8 * 1024, kCols};
  const auto p =
      ReshardProblem::make({testing::make_reshard("w", shape, make_layout(shape, {1}, rank_range(0, 1), "R"),
                                                  make_layout(shape, {2}, rank_range(1, 2), "S0"))},
                           1, 2)
          .value();
  const auto c = testing::make_test_cluster(3, 1, 1, 2);
  const auto plan = plan_of(p, {transfer(0, 0, 1, 0, 0, 4), transfer(1, 0, 2, 0, 4, 4)});
  EXPECT_NEAR(predicted(plan, p, c, 1), kAlpha + 8 * kU, 1e-9);
}

TEST(PlanWindow, PairsShareLinksByTheirBytesAsRefitsExecutorPacesThem) {
  // Sources 0, 1, 2 and destinations X = 3, Y = 4, one NIC each; pairs 0->X 3 MiB, 0->Y 2,
  // 1->X 4, 1->Y 3, 2->Y 2. The busiest NICs (1's tx, X's and Y's rx) carry 7 MiB: bound 7U.
  // refit-ucx: each pair's share is in proportion to its bytes (lowering/pair_pacing.h), so at
  // the common level 1/7 every pair runs at bytes/7 U: the three busy NICs are exactly full and
  // every pair ends at alpha + 7U.
  // Equal shares (NCCL collectives): Y's three pairs get 1/3; 0->X and 1->X then 1/2 on X.
  // At 6U 0->X, 0->Y and 2->Y are done and 1->X, 1->Y have 1 MiB each left, sharing 1's NIC
  // at 1/2: alpha + 8U, a NIC's worth of 1 MiB after the bound.
  const auto p = ReshardProblem::make({replicated("a", 3, 0, {Rank{3}}), replicated("b", 2, 0, {Rank{4}}),
                                       replicated("c", 4, 1, {Rank{3}}), replicated("d", 3, 1, {Rank{4}}),
                                       replicated("e", 2, 2, {Rank{4}})},
                                      3, 2)
                     .value();
  const auto c = testing::make_test_cluster(5, 1, 3, 2);
  auto plan = plan_of(p, {transfer(0, 0, 3, 0, 0, 3), transfer(1, 0, 4, 1, 0, 2), transfer(2, 1, 3, 2, 0, 4),
                          transfer(3, 1, 4, 3, 0, 3), transfer(4, 2, 4, 4, 0, 2)});
  EXPECT_NEAR(predicted(plan, p, c, 16), kAlpha + 7 * kU, 1e-9);
  plan.execution = ExecutionModelId::kNcclCollectives;
  EXPECT_NEAR(predicted(plan, p, c, 0), kAlpha + 8 * kU, 1e-9);
}

TEST(PlanWindow, APairsQueueWaitsAtARelayUntilItsDataHasLanded) {
  // Sources 0 and 1 send a (8 MiB) and b (4 MiB) to rank 2, which forwards both to rank 3:
  // u1 = 0->2 a, u2 = 1->2 b, r1 = 2->3 a (via u1), r2 = 2->3 b (via u2), in that order.
  // u1 and u2 share rank 2's NIC, which is busy from alpha on: u2 ends at alpha + 8U (both at
  // half rate while both flow), u1 at alpha + 12U.
  // Window 16: the pair 2->3 puts r1's chunks first, and its last one waits for the end of u1;
  // r2 queues behind it. From alpha + 12U the pair still has r1's last chunk and r2's 4 MiB to
  // send, back to back: alpha + 17U.
  // Window 0: r2 goes as soon as u2 has delivered, so the pair's 12 MiB flow back to back from
  // when the relays' heads can start (u1's and u2's first chunks in at alpha + 2U, plus alpha):
  // 2 alpha + 14U.
  const auto p = ReshardProblem::make(
                     {replicated("a", 8, 0, rank_range(2, 2)), replicated("b", 4, 1, rank_range(2, 2))}, 2, 2)
                     .value();
  const auto c = testing::make_test_cluster(4, 1, 2, 2);
  const auto plan = plan_of(p, {transfer(0, 0, 2, 0, 0, 8), transfer(1, 1, 2, 1, 0, 4),
                                transfer(2, 2, 3, 0, 0, 8, 0), transfer(3, 2, 3, 1, 0, 4, 1)});
  EXPECT_NEAR(predicted(plan, p, c, 16), kAlpha + 17 * kU, 1e-9);
  EXPECT_NEAR(predicted(plan, p, c, 0), 2 * kAlpha + 14 * kU, 1e-9);
}

TEST(PlanWindow, ARelayOfPartOfAMessageGoesOnceThatPartHasLanded) {
  // Source 0 sends rank 2 one message u of a (2 MiB) then b (6 MiB); rank 2 forwards a alone to
  // rank 3 (r, via u). a is u's first two chunks, in at alpha + 2U, so r (one chunk after u's
  // first, a latency later, on NICs u does not use) ends at 2 alpha + 3U, and u at alpha + 8U
  // ends the refit. Waiting for all of u, as a relay of a whole message must, would put r's last
  // chunk after alpha + 8U: alpha + 9U.
  const auto p =
      ReshardProblem::make({replicated("a", 2, 0, rank_range(2, 2)), replicated("b", 6, 0, {Rank{2}})}, 1, 3)
          .value();
  const auto c = testing::make_test_cluster(4, 1, 1, 3);
  auto u = transfer(0, 0, 2, 0, 0, 2);
  u.segments.push_back(Segment{1, Box{{0, 0}, {6 * 1024, kCols}}, kFromSourceShard});
  u.bytes = Bytes{8 * kMiB};
  const auto plan = plan_of(p, {u, transfer(1, 2, 3, 0, 0, 2, 0)});
  EXPECT_NEAR(predicted(plan, p, c, 16), kAlpha + 8 * kU, 1e-9);
}

TEST(PlanWindow, UnpackingFollowsTheLandingWhileThePairGoesOn) {
  // One pair, three messages: tensor a whole (2 MiB, contiguous at both ends), then tensor b's
  // two column halves (1 MiB each), which the receiver unpacks into its whole copy of b
  // (u = 1 MiB / copy bandwidth; the sender packs them too, while a flows). The pair streams the
  // 4 MiB back to back; the last half's unpack comes after it lands: alpha + 4U + u.
  const auto p =
      ReshardProblem::make({replicated("a", 2, 0, {Rank{1}}), replicated("b", 2, 0, {Rank{1}})}, 1, 1)
          .value();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto half = [](std::int32_t id, std::int64_t column) {
    return Transfer{id,
                    Rank{0},
                    Rank{1},
                    LinkKind::kNetwork,
                    {Segment{1, Box{{0, column}, {2 * 1024, kCols / 2}}, kFromSourceShard}},
                    Bytes{kMiB},
                    Bytes{kMiB}};
  };
  const auto plan = plan_of(p, {transfer(0, 0, 1, 0, 0, 2), half(1, 0), half(2, kCols / 2)});
  const double u = kMiB / 1500e9;
  EXPECT_NEAR(predicted(plan, p, c, 16), kAlpha + 4 * kU + u, 1e-9);
}

// The baselines stand for NCCL collectives (a channel per ring step: no per-pair queue); refit's
// own strategies for refit's executors (the UCX grant window).
TEST(PlanWindow, DefaultWindowFollowsWhatRunsTheStrategy) {
  const auto window = [](StrategyId id) { return execution_model(strategy_info(id).execution).pair_window; };
  EXPECT_EQ(window(StrategyId::kM2nRing), 0);
  EXPECT_EQ(window(StrategyId::kGatherBroadcast), 0);
  EXPECT_EQ(window(StrategyId::kRefit), 16);
  EXPECT_EQ(window(StrategyId::kDirect), 16);
  EXPECT_EQ(execution_model(strategy_info(StrategyId::kRefit).execution).name, "refit-ucx");
}

}  // namespace
}  // namespace refit
