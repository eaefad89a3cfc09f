// simulate_plan with a CallSchedule: calls of one queue run in order, each paying its fixed
// costs around its bytes; calls of two queues overlap; a call ends with its slowest rank; device
// copies and NCCL ring collectives cost what their bytes over their links take. Closed forms on
// hand-built plans, with 1 MiB chunks: U = 1 MiB / NIC bandwidth, alpha = network latency,
// C = 1 MiB / copy bandwidth.
#include <gtest/gtest.h>

#include "refit/simulator/plan_simulation.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

constexpr double kNicBw = 50e9;
constexpr double kCopyBw = 1500e9;
constexpr double kAlpha = 15e-6;
constexpr std::int64_t kMiB = 1 << 20;
constexpr double kU = kMiB / kNicBw;
constexpr double kC = kMiB / kCopyBw;
constexpr std::int64_t kCols = 512;  // bf16 rows of 1 KiB: 1024 rows make 1 MiB

// Tensor `name` of `mib` MiB, whole on source rank `from`, whole on destination rank `to`.
TensorReshard moved(std::string name, std::int64_t mib, std::int32_t from, std::int32_t to) {
  const Shape shape{mib * 1024, kCols};
  return testing::make_reshard(std::move(name), shape, make_layout(shape, {1}, rank_range(from, 1), "R"),
                               make_layout(shape, {1}, rank_range(to, 1), "R"));
}

// Tensor i moved whole from its source to its destination in one transfer.
Plan whole_tensor_plan(const ReshardProblem& p) {
  Plan plan{.strategy = "hand", .source_ranks = p.source_ranks(), .destination_ranks = p.destination_ranks()};
  for (std::size_t i = 0; i < p.tensors().size(); ++i) {
    const auto& t = p.tensors()[i];
    plan.tensors.push_back(t.tensor);
    plan.transfers.push_back(
        Transfer{.id = static_cast<std::int32_t>(i),
                 .sender = t.source.mesh().rank_at(0),
                 .receiver = t.destination.mesh().rank_at(0),
                 .link = LinkKind::kNetwork,
                 .segments = {Segment{static_cast<std::uint32_t>(i), Box{{0, 0}, t.tensor.shape}}},
                 .bytes = t.tensor.bytes(),
                 .chunk = Bytes{kMiB}});
  }
  EXPECT_TRUE(validate(plan, p)) << validate(plan, p).error().message;
  return plan;
}

PlanSimulation simulated(const Plan& plan, const ReshardProblem& p, const PlacedCluster& c,
                         const CallSchedule& calls) {
  PlanSimulationOptions o{.window = 0, .calls = &calls, .rate_tolerance = 0};
  auto sim = simulate_plan(plan, p, c, o);
  EXPECT_TRUE(sim) << sim.error().message;
  return *sim;
}

Call call_of(std::int32_t transfer, std::int32_t queue, double launch_s) {
  return Call{.label = "call " + std::to_string(transfer),
              .queue = queue,
              .launch = Seconds{launch_s},
              .transfers = {transfer}};
}

TEST(Calls, NSequentialCallsOfFixedCostTakeNTimesFixedPlusBytesOverBandwidth) {
  // Four tensors of 2 MiB from rank 0 to rank 1, one call each on queue 0, launch o = 100 us,
  // finish f = 20 us: each call is o + alpha + 2U + f, one after another: 4(o + f + alpha + 2U).
  const double o = 100e-6, f = 20e-6;
  std::vector<TensorReshard> tensors;
  for (int i = 0; i < 4; ++i) tensors.push_back(moved("w" + std::to_string(i), 2, 0, 1));
  const auto p = ReshardProblem::make(tensors, 1, 1).value();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  CallSchedule s;
  for (int i = 0; i < 4; ++i) {
    s.calls.push_back(call_of(i, 0, o));
    s.calls.back().finish = Seconds{f};
  }
  EXPECT_NEAR(simulated(whole_tensor_plan(p), p, c, s).predicted.value, 4 * (o + f + kAlpha + 2 * kU), 1e-9);
}

TEST(Calls, TwoQueuesOverlapTwoCalls) {
  // 0 -> 2 and 1 -> 3, 4 MiB each, on NICs of their own. One queue: 2(o + alpha + 4U);
  // two queues: both at once, o + alpha + 4U.
  const double o = 50e-6;
  const auto p = ReshardProblem::make({moved("a", 4, 0, 2), moved("b", 4, 1, 3)}, 2, 2).value();
  const auto c = testing::make_test_cluster(2, 2, 2, 2);
  const auto plan = whole_tensor_plan(p);
  EXPECT_NEAR(simulated(plan, p, c, {.calls = {call_of(0, 0, o), call_of(1, 0, o)}}).predicted.value,
              2 * (o + kAlpha + 4 * kU), 1e-9);
  EXPECT_NEAR(simulated(plan, p, c, {.calls = {call_of(0, 0, o), call_of(1, 1, o)}}).predicted.value,
              o + kAlpha + 4 * kU, 1e-9);
}

TEST(Calls, ACallEndsWithItsSlowestRank) {
  // Call 0 moves 1 MiB 0 -> 2 and 3 MiB 1 -> 3 on separate NICs; call 1 (same queue) 1 MiB
  // 0 -> 2. Call 0 ends when rank 3's last byte lands, alpha + 3U, though rank 2 was done at
  // alpha + U; call 1 then takes alpha + U more: 2 alpha + 4U. Waiting on the slowest rank, in
  // call 0: its slowest arrival (3U) minus the mean of both (2U) = U (call 1 has one receiver).
  const auto p =
      ReshardProblem::make({moved("a", 1, 0, 2), moved("b", 3, 1, 3), moved("c", 1, 0, 2)}, 2, 2).value();
  const auto c = testing::make_test_cluster(2, 2, 2, 2);
  const CallSchedule s{.calls = {Call{.label = "first", .transfers = {0, 1}}, call_of(2, 0, 0)}};
  const auto sim = simulated(whole_tensor_plan(p), p, c, s);
  EXPECT_NEAR(sim.predicted.value, 2 * kAlpha + 4 * kU, 1e-9);
  EXPECT_NEAR(sim.waiting.value, kU, 1e-9);
}

// Tensors of `mib` MiB each, whole on rank 0, replicated on ranks 1 and 2, every rank on a node
// of its own.
ReshardProblem replicated_on_two(const std::vector<std::int64_t>& mib) {
  std::vector<TensorReshard> tensors;
  for (std::size_t i = 0; i < mib.size(); ++i) {
    const Shape shape{mib[i] * 1024, kCols};
    tensors.push_back(testing::make_reshard("t" + std::to_string(i), shape,
                                            make_layout(shape, {1}, rank_range(0, 1), "R"),
                                            make_layout(shape, {2}, rank_range(1, 2), "R")));
  }
  return ReshardProblem::make(tensors, 1, 2).value();
}

// A two-hop relay of every tensor of `p` (replicated_on_two): transfer i moves tensor i 0 -> 1,
// transfer n + i forwards it 1 -> 2; 1 MiB chunks.
Plan two_hop_relay(const ReshardProblem& p) {
  Plan plan{.strategy = "hand", .source_ranks = 1, .destination_ranks = 2};
  for (const auto& t : p.tensors()) plan.tensors.push_back(t.tensor);
  const auto n = static_cast<std::int32_t>(p.tensors().size());
  for (std::int32_t id = 0; id < 2 * n; ++id) {
    const std::int32_t hop = id / n, tensor = id % n;
    const auto& spec = p.tensors()[static_cast<std::size_t>(tensor)].tensor;
    plan.transfers.push_back(
        Transfer{.id = id,
                 .sender = Rank{hop},
                 .receiver = Rank{hop + 1},
                 .link = LinkKind::kNetwork,
                 .segments = {Segment{static_cast<std::uint32_t>(tensor), Box{{0, 0}, spec.shape},
                                      hop == 0 ? kFromSourceShard : tensor}},
                 .bytes = spec.bytes(),
                 .chunk = Bytes{kMiB}});
  }
  EXPECT_TRUE(validate(plan, p)) << validate(plan, p).error().message;
  return plan;
}

TEST(Calls, PairsInOrderLetARelayForwardTheFirstSliceWhileTheSecondArrives) {
  // Two 2 MiB tensors a (t0) and b (t1), each relayed 0 -> 1 -> 2, store and forward.
  const auto p = replicated_on_two({2, 2});
  const auto c = testing::make_test_cluster(3, 1, 1, 2);
  const auto plan = two_hop_relay(p);
  CallSchedule s{.calls = {Call{.label = "reshard", .transfers = {0, 1, 2, 3}}}, .store_and_forward = true};
  // Every transfer a flow of its own: a and b share rank 0's NIC and both land at alpha + 4U;
  // then both forwards share rank 1's: 2 alpha + 8U.
  EXPECT_NEAR(simulated(plan, p, c, s).predicted.value, 2 * kAlpha + 8 * kU, 1e-9);
  // In order: a lands at alpha + 2U and goes on at once while b lands (alpha + 4U); b's forward
  // follows a's on the 1 -> 2 pair, its latency paid meanwhile: 2 alpha + 6U.
  s.pairs_in_order = true;
  EXPECT_NEAR(simulated(plan, p, c, s).predicted.value, 2 * kAlpha + 6 * kU, 1e-9);
}

// An 8 MiB tensor (8 chunks) relayed 0 -> 1 -> 2 by the transfers `relay` names, upstream first,
// in one call of `plan` (two_hop_relay). Store and forward in 4 slices: the forward starts once the
// first 2 MiB have landed (alpha + 2U), runs beside the upstream, and its last slice goes once all
// of it has landed (alpha + 8U) but after its own first 6 MiB (2 alpha + 8U): 2 alpha + 10U. Whole
// transfers: 2 alpha + 16U; chunk by chunk: 2 alpha + 9U.
void expect_an_8_mib_relay(const Plan& plan, const ReshardProblem& p, std::vector<std::int32_t> relay) {
  const auto c = testing::make_test_cluster(3, 1, 1, 2);
  CallSchedule s{.calls = {Call{.label = "reshard", .transfers = std::move(relay)}},
                 .store_and_forward = true};
  EXPECT_NEAR(simulated(plan, p, c, s).predicted.value, 2 * kAlpha + 16 * kU, 1e-9);
  s.relay_slices = 4;
  EXPECT_NEAR(simulated(plan, p, c, s).predicted.value, 2 * kAlpha + 10 * kU, 1e-9);
  s.store_and_forward = false;
  EXPECT_NEAR(simulated(plan, p, c, s).predicted.value, 2 * kAlpha + 9 * kU, 1e-9);
}

TEST(Calls, SlicedRelaysForwardEachSliceOnceItHasLanded) {
  // a (t0: 8 MiB) relayed 0 -> 1 -> 2 by transfers 0 and 1.
  const auto p = replicated_on_two({8});
  expect_an_8_mib_relay(two_hop_relay(p), p, {0, 1});
}

TEST(Calls, TheTransfersTheCallsMoveRelayAsInAPlanOfTheirOwn) {
  // a (t0: 2 MiB) and b (t1: 8 MiB), each relayed 0 -> 1 -> 2; the one call moves b's transfers
  // (1, and 3 forwarding 1) only. a does not run, and b's forward waits for b's upstream as a
  // relay of b alone would.
  const auto p = replicated_on_two({2, 8});
  expect_an_8_mib_relay(two_hop_relay(p), p, {1, 3});
}

TEST(Calls, PairsInOrderAreInOrderWithinOneQueueOnly) {
  // a (4 MiB) and b (1 MiB) both 0 -> 3, in calls of queues 0 and 1 (two communicators); then d
  // (4 MiB, 1 -> 4) in a call after b's on queue 1. a and b share rank 0's NIC: b lands at
  // alpha + 2U, a at alpha + 5U; d goes at once after b: 2 alpha + 6U. Were the pair one stream
  // across queues, b would wait for a and d would end at 2 alpha + 9U. Run as NCCL collectives,
  // whose connections share a NIC equally (pairs sharing by their bytes would land b with a).
  const auto p =
      ReshardProblem::make({moved("a", 4, 0, 3), moved("b", 1, 0, 3), moved("d", 4, 1, 4)}, 3, 3).value();
  const auto c = testing::make_test_cluster(6, 1, 3, 3);
  const CallSchedule s{.calls = {call_of(0, 0, 0), call_of(1, 1, 0), call_of(2, 1, 0)},
                       .pairs_in_order = true};
  auto plan = whole_tensor_plan(p);
  plan.execution = ExecutionModelId::kNcclCollectives;
  EXPECT_NEAR(simulated(plan, p, c, s).predicted.value, 2 * kAlpha + 6 * kU, 1e-9);
}

TEST(Calls, CopiesBeforeGateSendsAndCopiesAfterFollowArrivals) {
  // One call, 2 MiB 0 -> 1: rank 0 packs 2 MiB first (2C), rank 1 copies 4 MiB after (4C),
  // then the finish f: 2C + alpha + 2U + 4C + f. The copies count as copy time: 6C.
  const double f = 7e-6;
  const auto p = ReshardProblem::make({moved("a", 2, 0, 1)}, 1, 1).value();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const CallSchedule s{.calls = {Call{.label = "one",
                                      .finish = Seconds{f},
                                      .copies_before = {RankCopy{Rank{0}, Bytes{2 * kMiB}}},
                                      .copies_after = {RankCopy{Rank{1}, Bytes{4 * kMiB}}},
                                      .transfers = {0}}}};
  const auto sim = simulated(whole_tensor_plan(p), p, c, s);
  EXPECT_NEAR(sim.predicted.value, 6 * kC + kAlpha + 2 * kU + f, 1e-9);
  EXPECT_NEAR(sim.breakdown[TimeKind::kPackUnpack].value + sim.breakdown[TimeKind::kCopy].value, 6 * kC,
              1e-9);
  EXPECT_NEAR(sim.breakdown[TimeKind::kFixed].value, f, 1e-9);
}

TEST(Calls, ABroadcastRingCrossingDomainsRunsOneChannelPerNic) {
  // Two domains of two GPUs, a broadcast of 8 MiB from rank 0 over ranks 0,1,2,3 at efficiency
  // 0.8 with latency l. The ring leaves domain 0 and enters domain 1 through two distinct NICs,
  // so two channels each carry 4 MiB / 0.8 over one NIC pair (NVLink, 8x faster, never binds):
  // l + 5 MiB / NIC bandwidth = l + 5U. Transfers of the plan that no call names do not run.
  const double l = 30e-6;
  const auto p = ReshardProblem::make({moved("a", 1, 0, 2)}, 2, 2).value();
  const auto c = testing::make_test_cluster(2, 2, 2, 2);
  const CallSchedule s{.calls = {Call{.label = "bcast",
                                      .collective = Collective{.kind = CollectiveKind::kBroadcast,
                                                               .ranks = rank_range(0, 4),
                                                               .bytes = Bytes{8 * kMiB},
                                                               .latency = Seconds{l},
                                                               .efficiency = 0.8}}}};
  const auto sim = simulated(whole_tensor_plan(p), p, c, s);
  EXPECT_NEAR(sim.predicted.value, l + 5 * kU, 1e-9);
}

TEST(Calls, AnAllGatherMovesNMinusOneNthsOfTheTotalOverEachLink) {
  // All-gather of 8 MiB in total over ranks 0..3 (two per domain), efficiency 1: each link of the
  // closed ring carries 3/4 x 8 MiB = 6 MiB, split over two channels, 3 MiB per NIC pair: l + 3U.
  const double l = 40e-6;
  const auto p = ReshardProblem::make({moved("a", 1, 0, 2)}, 2, 2).value();
  const auto c = testing::make_test_cluster(2, 2, 2, 2);
  const CallSchedule s{.calls = {Call{.label = "gather",
                                      .collective = Collective{.kind = CollectiveKind::kAllGather,
                                                               .ranks = rank_range(0, 4),
                                                               .bytes = Bytes{8 * kMiB},
                                                               .latency = Seconds{l}}}}};
  EXPECT_NEAR(simulated(whole_tensor_plan(p), p, c, s).predicted.value, l + 3 * kU, 1e-9);
}

TEST(Calls, AfterOrdersCallsOfDifferentQueues) {
  // Two calls on separate NICs and queues, the second `after` the first: o + alpha + 4U twice.
  const double o = 10e-6;
  const auto p = ReshardProblem::make({moved("a", 4, 0, 2), moved("b", 4, 1, 3)}, 2, 2).value();
  const auto c = testing::make_test_cluster(2, 2, 2, 2);
  auto second = call_of(1, 1, o);
  second.after = {0};
  EXPECT_NEAR(simulated(whole_tensor_plan(p), p, c, {.calls = {call_of(0, 0, o), second}}).predicted.value,
              2 * (o + kAlpha + 4 * kU), 1e-9);
}

TEST(Calls, BadSchedulesAreRefusedNamingTheCall) {
  const auto p = ReshardProblem::make({moved("a", 1, 0, 1)}, 1, 1).value();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto plan = whole_tensor_plan(p);
  const auto refused = [&](CallSchedule s) {
    PlanSimulationOptions o{.calls = &s};
    const auto sim = simulate_plan(plan, p, c, o);
    EXPECT_FALSE(sim);
    return sim ? std::string{} : sim.error().message;
  };
  EXPECT_NE(refused({.calls = {call_of(0, 0, 0), call_of(0, 0, 0)}}).find("call"), std::string::npos);
  EXPECT_NE(refused({.calls = {call_of(3, 0, 0)}}).find("3"), std::string::npos);
  EXPECT_NE(refused({.calls = {call_of(0, 0, -1)}}).find("launch"), std::string::npos);
  auto loop = call_of(0, 0, 0);
  loop.after = {0};
  EXPECT_NE(refused({.calls = {loop}}).find("after"), std::string::npos);
  auto outside = call_of(0, 0, 0);
  outside.quantizes = {RankCast{Rank{2}, Bytes{1}, QuantScheme::kMxfp8}};
  EXPECT_NE(refused({.calls = {outside}}).find("quantizes rank 2"), std::string::npos);
  auto negative = call_of(0, 0, 0);
  negative.quantizes = {RankCast{Rank{1}, Bytes{-1}, QuantScheme::kMxfp8}};
  EXPECT_NE(refused({.calls = {negative}}).find("quantizes of rank 1: negative bytes"), std::string::npos);
  auto unknown = call_of(0, 0, 0);
  unknown.quantizes = {RankCast{Rank{1}, Bytes{1}, static_cast<QuantScheme>(7)}};
  EXPECT_NE(refused({.calls = {unknown}}).find("quantizes of rank 1: no FP8 format 7"), std::string::npos);
}

}  // namespace
}  // namespace refit
