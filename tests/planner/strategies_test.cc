#include <gtest/gtest.h>

#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::make_reshard;
using testing::make_test_cluster;
using testing::rank_range;

// [4096, 1024] bf16 = 8 MiB, rows split over 4 training ranks on node 0. Inference on node 1:
// a 2x2 mesh (R, S0): two row halves, each replicated on two GPUs of the same domain.
ReshardProblem replicated_in_one_domain() {
  return ReshardProblem::make(
             {make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {4}, rank_range(0, 4), "S0"),
                           make_layout({4096, 1024}, {2, 2}, rank_range(4, 4), "R,S0"))},
             4, 4)
      .value();
}

Plan plan_of(std::string_view strategy, const ReshardProblem& p, const PlacedCluster& c) {
  auto plan = make_plan(strategy, p, c);
  EXPECT_TRUE(plan) << plan.error().message;
  auto ok = validate(*plan, p);
  EXPECT_TRUE(ok) << strategy << ": " << ok.error().message;
  return *plan;
}

constexpr std::int64_t kTensorBytes = 4096 * 1024 * 2;

TEST(Strategies, RefitCrossesTheNetworkOncePerDomain) {
  const auto p = replicated_in_one_domain();
  const auto c = make_test_cluster(2, 4, 4, 4);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  // Both replicas of each half live in domain 1: the tensor enters it once, then one NVLink copy.
  EXPECT_EQ(s.network_bytes.value, kTensorBytes);
  EXPECT_EQ(s.nvlink_bytes.value, kTensorBytes);
  EXPECT_EQ(s.domain_ingress[1].value, kTensorBytes);
}

TEST(Strategies, DirectSendsEveryReplicaOverTheNetwork) {
  const auto p = replicated_in_one_domain();
  const auto c = make_test_cluster(2, 4, 4, 4);
  const auto s = compute_stats(plan_of("direct", p, c), c);
  EXPECT_EQ(s.network_bytes.value, 2 * kTensorBytes);  // two replicas, each straight from the source
  EXPECT_EQ(s.nvlink_bytes.value, 0);
}

TEST(Strategies, M2nRingUsesALeaderPerDomain) {
  const auto p = replicated_in_one_domain();
  const auto c = make_test_cluster(2, 4, 4, 4);
  const auto s = compute_stats(plan_of("m2n-ring", p, c), c);
  EXPECT_EQ(s.network_bytes.value, kTensorBytes);
  EXPECT_EQ(s.nvlink_bytes.value, kTensorBytes);
}

TEST(Strategies, GatherBroadcastSendsTheWholeTensorEverywhere) {
  const auto p = replicated_in_one_domain();
  const auto c = make_test_cluster(2, 4, 4, 4);
  const auto s = compute_stats(plan_of("gather-broadcast", p, c), c);
  // Gather: each of 4 training ranks receives the 3/4 it lacks over NVLink (3 x 8 MiB in all);
  // broadcast: a ring over 8 ranks, 7 hops of the full tensor, one of which crosses the network.
  EXPECT_EQ(s.nvlink_bytes.value, 3 * kTensorBytes + 6 * kTensorBytes);
  EXPECT_EQ(s.network_bytes.value, kTensorBytes);
}

TEST(Strategies, RefitSpreadsReplicatedSourcesOverAllNics) {
  // Source fully replicated on 4 ranks (node 0); destination rows split over 4 ranks (node 1).
  // UNIFORM picks source replica 0 for every piece (4 sources, 1 destination replica each), so
  // direct loads NIC 0 with the whole 8 MiB; refit gives each source NIC one 2 MiB piece.
  const auto p = ReshardProblem::make(
                     {make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {4}, rank_range(0, 4), "R"),
                                   make_layout({4096, 1024}, {4}, rank_range(4, 4), "S0"))},
                     4, 4)
                     .value();
  const auto c = make_test_cluster(2, 4, 4, 4);
  const auto direct = compute_stats(plan_of("direct", p, c), c);
  const auto refit = compute_stats(plan_of("refit", p, c), c);
  EXPECT_EQ(direct.max_nic_tx.value, kTensorBytes);
  EXPECT_EQ(refit.max_nic_tx.value, kTensorBytes / 4);
  EXPECT_EQ(refit.network_bytes, direct.network_bytes);
}

TEST(Strategies, RefitSplitsAPieceAcrossSendersWhenThatBalances) {
  // One destination rank needs the whole 8 MiB tensor, replicated on 4 source ranks with their
  // own NICs. The receiver NIC is the bound either way, but no sender needs more than a quarter:
  // the fractional optimum cuts the single piece into 4 row blocks of 2 MiB.
  const auto p = ReshardProblem::make(
                     {make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {4}, rank_range(0, 4), "R"),
                                   make_layout({4096, 1024}, {1}, rank_range(4, 1), "R"))},
                     4, 1)
                     .value();
  const auto c = make_test_cluster(2, 4, 4, 1);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  EXPECT_EQ(s.max_nic_rx.value, kTensorBytes);
  EXPECT_LE(s.max_nic_tx.value, kTensorBytes / 4 + 2 * 1024 * 2);  // within one row of a quarter
}

TEST(Strategies, ASmallModelOnSlowNicsIsSpreadOverItsReceivers) {
  // w [512, 1024] bf16 (1 MiB), replicated on 4 training ranks of node 0; node 1's ranks 5-8 hold
  // it as two replicas of two row halves (R,S0): half A on ranks 5 and 7, half B on 6 and 8. NICs
  // of 1 MB/s: each half can land on either of its replicas' NICs, 256 KiB on each. The balance
  // gives them those shares, but shares under the 1 MiB below which pieces were not cut all went
  // to the last NIC: 512 KiB on one, none on the other. Cuts now go down to an eighth of a class's
  // mean share (16 KiB here; a NIC of 1 MB/s moves 15 bytes in its 15 us of latency).
  const auto p = ReshardProblem::make(
                     {make_reshard("w", {512, 1024}, make_layout({512, 1024}, {4}, rank_range(0, 4), "R"),
                                   make_layout({512, 1024}, {2, 2}, rank_range(4, 4), "R,S0"))},
                     4, 4)
                     .value();
  const auto c = make_test_cluster(2, 4, 4, 4, 0.001);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  constexpr std::int64_t kHalf = 512 * 1024;
  EXPECT_EQ(s.network_bytes.value, 2 * kHalf);
  EXPECT_LE(s.max_nic_rx.value, kHalf / 2 + 2 * 1024 * 2);  // within two rows of a quarter
}

TEST(Strategies, PiecesHeldInsideTheDomainStayOnNvlink) {
  // Training and inference share one 8-GPU domain: nothing crosses the network.
  const auto p = replicated_in_one_domain();
  const auto c = make_test_cluster(1, 8, 4, 4);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  EXPECT_EQ(s.network_bytes.value, 0);
  EXPECT_EQ(s.nvlink_bytes.value, 2 * kTensorBytes);
}

TEST(Strategies, APieceHeldInsideTheDomainIsScatteredToItsReplicasWhichShareItOut) {
  // One training rank holds the 8 MiB that 4 inference ranks of its domain each need whole.
  // Sent whole to each, the holder's NVLink would carry 4 x 8 MiB; scattered in 4 slabs of
  // 2 MiB, one to each replica, which passes its slab to the other three, the holder sends
  // 8 MiB, each replica 3 x 2 MiB, and each receives its 8 MiB: 8 + 4 x 6 = 32 MiB in all, the
  // same NVLink bytes as before, none of it twice through one port.
  const auto p = ReshardProblem::make(
                     {make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {1}, rank_range(0, 1), "R"),
                                   make_layout({4096, 1024}, {4}, rank_range(1, 4), "R"))},
                     1, 4)
                     .value();
  const auto c = make_test_cluster(1, 8, 1, 4);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  EXPECT_EQ(s.network_bytes.value, 0);
  EXPECT_EQ(s.nvlink_bytes.value, 4 * kTensorBytes);
  EXPECT_EQ(s.nvlink_egress[0].value, kTensorBytes);
  for (std::int32_t g = 1; g <= 4; ++g) {
    EXPECT_EQ(s.nvlink_egress[static_cast<std::size_t>(g)].value, 3 * kTensorBytes / 4) << "GPU " << g;
    EXPECT_EQ(s.nvlink_ingress[static_cast<std::size_t>(g)].value, kTensorBytes) << "GPU " << g;
  }
}

TEST(Strategies, ScatteredPiecesTakeTheirTurnsAmongTheReplicas) {
  // Four 2 MiB tensors on one training rank, each needed whole by 8 inference ranks of its domain:
  // each is cut in 2 slabs of 1 MiB (no slab under 1 MiB), and the slabs land on replicas 0-1,
  // 2-3, 4-5, 6-7 in turn, so every replica passes 1 MiB on to 7 others: 7 MiB each, where
  // slabs that always began at replica 0 left replicas 0 and 1 sending 28 MiB and the rest none.
  std::vector<TensorReshard> tensors;
  for (const char* name : {"a", "b", "c", "d"})
    tensors.push_back(make_reshard(name, {1024, 1024}, make_layout({1024, 1024}, {1}, rank_range(0, 1), "R"),
                                   make_layout({1024, 1024}, {8}, rank_range(1, 8), "R")));
  const auto p = ReshardProblem::make(std::move(tensors), 1, 8).value();
  const auto c = make_test_cluster(1, 9, 1, 8);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  constexpr std::int64_t kMiB = 1 << 20;
  EXPECT_EQ(s.nvlink_egress[0].value, 8 * kMiB);  // each tensor once
  for (std::size_t g = 1; g <= 8; ++g) {
    EXPECT_EQ(s.nvlink_egress[g].value, 7 * kMiB) << "GPU " << g;
    EXPECT_EQ(s.nvlink_ingress[g].value, 8 * kMiB) << "GPU " << g;
  }
}

TEST(Strategies, AReplicaOnAHoldersGpuCopiesThePieceThereAndTakesNoSlab) {
  // The 4 inference ranks of the scatter above, the first on the training rank's own GPU: it
  // copies the 8 MiB locally, and the 3 others take the scattered slabs (3 of 8/3 MiB about).
  const auto p = ReshardProblem::make(
                     {make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {1}, rank_range(0, 1), "R"),
                                   make_layout({4096, 1024}, {4}, rank_range(1, 4), "R"))},
                     1, 4)
                     .value();
  auto cluster = make_test_cluster(1, 4, 1, 0).cluster();
  auto ranks = RankMap::make(cluster, {GpuId{0}, GpuId{0}, GpuId{1}, GpuId{2}, GpuId{3}}, 1).value();
  const auto c = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const auto s = compute_stats(plan_of("refit", p, c), c);
  EXPECT_EQ(s.local_bytes.value, kTensorBytes);
  EXPECT_EQ(s.nvlink_egress[0].value, kTensorBytes);  // the slabs, once, not a fourth one
  EXPECT_EQ(s.nvlink_ingress[0].value, 0);
}

TEST(Strategies, UnknownStrategyAndMismatchedClusterAreRefused) {
  const auto p = replicated_in_one_domain();
  auto unknown = make_plan("fastest", p, make_test_cluster(2, 4, 4, 4));
  ASSERT_FALSE(unknown);
  EXPECT_EQ(unknown.error().code, ErrorCode::kNotFound);
  EXPECT_NE(unknown.error().message.find("fastest"), std::string::npos);
  auto small = make_plan("refit", p, make_test_cluster(2, 4, 4, 2));
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, ErrorCode::kMismatch);
}

TEST(Strategies, PlansAreDeterministic) {
  const auto p = replicated_in_one_domain();
  const auto c = make_test_cluster(2, 4, 4, 4);
  for (auto name : strategy_names())
    EXPECT_EQ(plan_hash(make_plan(name, p, c).value()), plan_hash(make_plan(name, p, c).value())) << name;
}

}  // namespace
}  // namespace refit

namespace refit {
namespace {

TEST(Strategies, DestinationDomainsForwardWhenTheOnlyHolderIsOverloaded) {
  // One training GPU holds the whole 8 MiB; it is replicated on 4 inference domains of one GPU
  // each. Sending it four times would load the single source NIC with 32 MiB while every receiver
  // gets 8 MiB: refit sends it once per busiest-receiver budget and lets destination domains
  // forward the rest over their own (otherwise idle) NIC send side.
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024},
                                 testing::make_layout({4096, 1024}, {1}, testing::rank_range(0, 1), "R"),
                                 testing::make_layout({4096, 1024}, {4}, testing::rank_range(1, 4), "R"))},
          1, 4)
          .value();
  const auto c = testing::make_test_cluster(5, 1, 1, 4);
  const auto plan = make_plan("refit", p, c).value();
  ASSERT_TRUE(validate(plan, p)) << validate(plan, p).error().message;
  const auto s = compute_stats(plan, c);
  EXPECT_EQ(s.max_nic_rx.value, kTensorBytes);
  EXPECT_EQ(s.max_nic_tx.value, kTensorBytes);         // down from 4 x 8 MiB on the source NIC
  EXPECT_EQ(s.network_bytes.value, 4 * kTensorBytes);  // still one copy into each domain
}

}  // namespace
}  // namespace refit

namespace refit {
namespace {

// Source 0 holds a (8 MiB), wanted whole by the 4 inference ranks 5..8 (single-GPU domains),
// and d (2 MiB), wanted by rank 6 only; sources 1..4 each send 12 MiB of c to one of 5..8.
// The busiest receiver (rank 6) takes 8 + 12 + 2 = 22 MiB; source 0 would send 4 x 8 + 2 =
// 34 MiB, so two of a's copies are forwarded (34 -> 26 -> 18 MiB).
ReshardProblem one_holder_and_background() {
  const Shape a{4096, 1024}, c{24576, 1024}, d{1024, 1024};
  return ReshardProblem::make({make_reshard("a", a, make_layout(a, {1}, rank_range(0, 1), "R"),
                                            make_layout(a, {4}, rank_range(5, 4), "R")),
                               make_reshard("c", c, make_layout(c, {4}, rank_range(1, 4), "S0"),
                                            make_layout(c, {4}, rank_range(5, 4), "S0")),
                               make_reshard("d", d, make_layout(d, {1}, rank_range(0, 1), "R"),
                                            make_layout(d, {1}, rank_range(6, 1), "R"))},
                              5, 4)
      .value();
}

TEST(Strategies, ForwardingBuildsAShallowTreeWhereTheForwarderHasRoom) {
  // Each hop waits for the one before it, so the two forwarded copies of a both come from a
  // domain that got a from the source (a star: its NIC sends 16 MiB <= 22 MiB), rather than
  // a chain source -> x -> y -> z.
  const auto p = one_holder_and_background();
  const auto c = make_test_cluster(9, 1, 5, 4);
  const auto plan = plan_of("refit", p, c);
  int relays = 0;
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments)
      if (s.via != kFromSourceShard && t.link == LinkKind::kNetwork) {
        ++relays;
        EXPECT_LT(plan.transfers[static_cast<std::size_t>(s.via)].sender.value, 5) << "transfer " << t.id;
      }
  EXPECT_EQ(relays, 2);
  EXPECT_LE(compute_stats(plan, c).max_nic_tx.value, 22 << 20);
}

TEST(Strategies, DataThatIsForwardedLeadsItsPair) {
  // The landing rank that forwards a also receives d from source 0: a travels in a message of
  // its own, ahead of d's, so the relays need not wait for d.
  const auto p = one_holder_and_background();
  const auto c = make_test_cluster(9, 1, 5, 4);
  const auto plan = plan_of("refit", p, c);
  std::vector<bool> feeds(plan.transfers.size(), false);
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments)
      if (s.via != kFromSourceShard) feeds[static_cast<std::size_t>(s.via)] = true;
  bool mixed = false;
  for (const auto& t : plan.transfers)
    for (const auto& later : plan.transfers)
      if (later.id > t.id && later.sender == t.sender && later.receiver == t.receiver) {
        mixed = mixed || feeds[static_cast<std::size_t>(t.id)] != feeds[static_cast<std::size_t>(later.id)];
        EXPECT_FALSE(feeds[static_cast<std::size_t>(later.id)] && !feeds[static_cast<std::size_t>(t.id)])
            << "transfer " << later.id << " feeds relays but queues behind " << t.id;
      }
  EXPECT_TRUE(mixed);
}

}  // namespace
}  // namespace refit

namespace refit {
namespace {

// Rank 0 holds the whole of w (8 MiB), rank 1 beside it on node 0 the whole of v (128 KiB); ranks 2
// and 3 on node 1 need both whole.
ReshardProblem one_holder_beside_a_light_sender() {
  const Shape w{4096, 1024}, v{64, 1024};
  return ReshardProblem::make({make_reshard("w", w, make_layout(w, {1}, rank_range(0, 1), "R"),
                                            make_layout(w, {2}, rank_range(2, 2), "R")),
                               make_reshard("v", v, make_layout(v, {1}, rank_range(1, 1), "R"),
                                            make_layout(v, {2}, rank_range(2, 2), "R"))},
                              2, 2)
      .value();
}

constexpr std::int64_t kLightBytes = 64 * 1024 * 2;

TEST(Strategies, ABusyNicHandsPartOfWhatItSendsToItsNeighboursOverNvlink) {
  // Sent by their holders alone, w leaves through NIC 0 (8 MiB) while NIC 1 sends v (128 KiB);
  // node 1's two NICs take in about half each. Node 0's NICs level at about half of the 8.125 MiB
  // each: the head rows of w hop to rank 1 over NVLink and leave through NIC 1. The network still
  // carries each byte into node 1 once.
  const auto p = one_holder_beside_a_light_sender();
  const auto c = make_test_cluster(2, 2, 2, 2);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  const double half = (kTensorBytes + kLightBytes) / 2.0;
  EXPECT_LT(s.max_nic_tx.value, half * 1.05);
  EXPECT_EQ(s.network_bytes.value, kTensorBytes + kLightBytes);
  EXPECT_GT(s.nvlink_bytes.value, kTensorBytes + kLightBytes);  // the hop, besides 2 <-> 3 completing
}

TEST(Strategies, AHopOverNvlinkSlowerThanTheNicTakesNoLongerThanTheLevel) {
  // As above with NVLink at 20 GB/s, two fifths of the NICs' 50: the level is half of the
  // 8.125 MiB at 50 GB/s (85 us), and in that time rank 0's NVLink carries 85 us x 20 GB/s, about
  // 1.7 MB, not the 4 MiB that would level the NICs. NIC 0 keeps the rest.
  const auto p = one_holder_beside_a_light_sender();
  const auto c = make_test_cluster(2, 2, 2, 2, 50, 20);
  const auto s = compute_stats(plan_of("refit", p, c), c);
  const double hop_bytes = (kTensorBytes + kLightBytes) / 2.0 / 50e9 * 20e9;
  const auto hop = static_cast<double>(s.nvlink_egress[0].value);
  EXPECT_GT(hop, hop_bytes / 2);
  EXPECT_LE(hop, hop_bytes);
  EXPECT_GE(static_cast<double>(s.max_nic_tx.value), kTensorBytes - hop_bytes);
}

TEST(Strategies, APlanForADeltaRefitKeepsNoRelaysScratch) {
  // The same for a delta refit, which keeps no bytes outside the ranks' boxes: NIC 0 sends all of
  // w, and no transfer lands on rank 1.
  const auto p = one_holder_beside_a_light_sender();
  const auto c = make_test_cluster(2, 2, 2, 2);
  const auto plan = make_plan("refit", p, c, PlanOptions{.neighbour_relays = false});
  ASSERT_TRUE(plan) << plan.error().message;
  const auto s = compute_stats(*plan, c);
  EXPECT_EQ(s.max_nic_tx.value, kTensorBytes);
  for (const auto& t : plan->transfers) EXPECT_NE(t.receiver, Rank{1}) << "transfer " << t.id;
}

}  // namespace
}  // namespace refit
