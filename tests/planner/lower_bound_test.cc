#include <gtest/gtest.h>

#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

TEST(LowerBound, DestinationDomainReceiveBound) {
  // 8 MiB replicated on all 4 GPUs of domain 1, held on domain 0: domain 1 must receive 8 MiB
  // through 4 NICs of 50 GB/s: 8 MiB / 200 GB/s. The source side injects the same 8 MiB through
  // 4 NICs, so the two bounds are equal; each GPU needs 8 MiB over 450 GB/s (NVLink + NIC).
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {4}, rank_range(0, 4), "S0"),
                                 make_layout({4096, 1024}, {4}, rank_range(4, 4), "R"))},
          4, 4)
          .value();
  const auto c = testing::make_test_cluster(2, 4, 4, 4);
  const auto lb = lower_bound(p, c);
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_NEAR(lb.destination_domain.value, bytes / 200e9, 1e-12);
  EXPECT_NEAR(lb.source_side.value, bytes / 200e9, 1e-12);
  EXPECT_NEAR(lb.gpu_ingress.value, bytes / 450e9, 1e-12);
  EXPECT_EQ(lb.domain_need[1].value, static_cast<std::int64_t>(bytes));
  EXPECT_NEAR(lb.time.value, bytes / 200e9, 1e-12);

  // refit reaches it: every byte enters domain 1 once, spread evenly over its 4 NICs.
  const auto s = compute_stats(make_plan("refit", p, c).value(), c);
  EXPECT_EQ(s.domain_ingress[1], lb.domain_need[1]);
  EXPECT_EQ(s.max_nic_rx.value, static_cast<std::int64_t>(bytes / 4));
}

TEST(LowerBound, ADomainReceivesThroughTheNicsOfTheJobsRanksThere) {
  // As above, but only 2 ranks need it in domain 1 (GPUs 4 and 5; 6 and 7 idle): a rank receives
  // through its own GPU's NIC, so 8 MiB enter through 2 NICs, 100 GB/s, not all 4 (200 GB/s).
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {4}, rank_range(0, 4), "S0"),
                                 make_layout({4096, 1024}, {2}, rank_range(4, 2), "R"))},
          4, 2)
          .value();
  const auto lb = lower_bound(p, testing::make_test_cluster(2, 4, 4, 2));
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_NEAR(lb.destination_domain.value, bytes / 100e9, 1e-12);
  EXPECT_EQ(lb.binding, "destination domain NIC receive");
}

TEST(LowerBound, AGpuWithoutANicBoundsNothingOverTheNetwork) {
  // As above on 2 domains of 2 GPUs, GPU 3 without a NIC: the simulator routes its network
  // traffic through no NIC, so neither its domain's NICs nor its own links bound what reaches
  // it (a bound once read infinite here, or above what the simulator predicts). GPU 2 still
  // takes its 8 MiB over NVLink + its NIC (450 GB/s); the source side sends 8 MiB through 2 NICs.
  auto spec = testing::make_test_cluster(2, 2, 2, 2).cluster().spec();
  spec.nics.pop_back();
  const auto c = testing::place_test_ranks(std::move(spec), 2, 2);
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {2}, rank_range(0, 2), "S0"),
                                 make_layout({4096, 1024}, {2}, rank_range(2, 2), "R"))},
          2, 2)
          .value();
  const auto lb = lower_bound(p, c);
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_EQ(lb.destination_domain.value, 0);
  EXPECT_NEAR(lb.gpu_ingress.value, bytes / 450e9, 1e-12);
  EXPECT_NEAR(lb.source_side.value, bytes / 100e9, 1e-12);
  EXPECT_NEAR(lb.time.value, bytes / 100e9, 1e-12);
}

// 8 MiB (bf16 4096 x 1024) held whole by rank 0 alone and needed whole by each of `replicas`
// destination ranks, with `sources` source ranks in all (the others hold nothing of it).
ReshardProblem one_holder(std::int32_t sources, std::int32_t replicas) {
  return ReshardProblem::make({testing::make_reshard(
                                  "w", {4096, 1024}, make_layout({4096, 1024}, {1}, rank_range(0, 1), "R"),
                                  make_layout({4096, 1024}, {replicas}, rank_range(sources, replicas), "R"))},
                              sources, replicas)
      .value();
}

TEST(LowerBound, SingleHolderNicBound) {
  // Rank 0 alone in its domain (GPUs 1-3 idle) holds the 8 MiB that domain 1's 4 ranks need: with
  // no other rank of the job there to relay through, they leave through NIC 0 (50 GB/s) at least
  // once.
  auto cluster = testing::make_test_cluster(2, 4, 1, 4).cluster();
  auto ranks = RankMap::make(cluster, {GpuId{0}, GpuId{4}, GpuId{5}, GpuId{6}, GpuId{7}}, 1).value();
  const auto placed = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const auto lb = lower_bound(one_holder(1, 4), placed);
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_NEAR(lb.source_nic.value, bytes / 50e9, 1e-12);
  EXPECT_NEAR(lb.source_domain.value, bytes / 50e9, 1e-12);
  EXPECT_NEAR(lb.time.value, bytes / 50e9, 1e-12);
}

TEST(LowerBound, BytesOneGpuHoldsMayLeaveThroughTheNicsOfTheJobsOtherRanksInItsDomain) {
  // As above, but 4 source ranks in domain 0 (ranks 1-3 hold nothing of the tensor): a plan may
  // copy the 8 MiB over NVLink to them and send it out through all 4 NICs, so no single NIC
  // bounds it; domain 0's 4 NICs do (200 GB/s), as do domain 1's.
  const auto lb = lower_bound(one_holder(4, 4), testing::make_test_cluster(2, 4, 4, 4));
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_EQ(lb.source_nic.value, 0);
  EXPECT_NEAR(lb.source_domain.value, bytes / 200e9, 1e-12);
  EXPECT_NEAR(lb.source_side.value, bytes / 200e9, 1e-12);
}

TEST(LowerBound, DestinationRanksInTheSourceDomainLendTheirNicsToWhatLeavesIt) {
  // Two nodes of 2 GPUs: rank 0 (GPU 0) holds the 8 MiB, destination ranks 1-3 need it whole on
  // GPUs 1, 2 and 3. Rank 1 shares node 0, so the bytes may leave through NIC 0 or NIC 1 (it
  // forwards what it received over NVLink, as the M2N ring does): 8 MiB / 100 GB/s, not the
  // 50 GB/s of the holder's own NIC. Node 1 takes them in through its 2 NICs: 100 GB/s.
  const auto lb = lower_bound(one_holder(1, 3), testing::make_test_cluster(2, 2, 1, 3));
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_EQ(lb.source_nic.value, 0);
  EXPECT_NEAR(lb.source_domain.value, bytes / 100e9, 1e-12);
  EXPECT_NEAR(lb.source_side.value, bytes / 100e9, 1e-12);
  EXPECT_NEAR(lb.destination_domain.value, bytes / 100e9, 1e-12);
}

// 8 MiB (bf16 4096 x 1024) held split by rows on ranks 0-1, needed whole on ranks 2-3.
ReshardProblem halves_to_two_replicas() {
  return ReshardProblem::make(
             {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {2}, rank_range(0, 2), "S0"),
                                    make_layout({4096, 1024}, {2}, rank_range(2, 2), "R"))},
             2, 2)
      .value();
}

TEST(LowerBound, AJobInOneDomainIsBoundByNvlinkAlone) {
  // All 4 ranks on one node of 4 GPUs: no other domain to relay through and no network link
  // inside a domain, so each destination GPU takes its 8 MiB over NVLink (400 GB/s) alone, not
  // NVLink + NIC (450 GB/s); each source GPU is the only holder of 4 MiB that the others need.
  const auto p = halves_to_two_replicas();
  const auto lb = lower_bound(p, testing::make_test_cluster(1, 4, 2, 2));
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_NEAR(lb.gpu_ingress.value, bytes / 400e9, 1e-12);
  EXPECT_NEAR(lb.gpu_egress.value, bytes / 2 / 400e9, 1e-12);
  EXPECT_EQ(lb.destination_domain.value, 0);
  EXPECT_EQ(lb.binding, "GPU ingress");

  // Over two domains the NIC is a way in as well: 8 MiB / 450 GB/s.
  const auto spread = lower_bound(p, testing::make_test_cluster(2, 2, 2, 2));
  EXPECT_NEAR(spread.gpu_ingress.value, bytes / 450e9, 1e-12);
}

TEST(LowerBound, BytesAGpuAlreadyHoldsCrossNoLink) {
  // The destination ranks on the source ranks' GPUs (0 and 1): GPU 0 holds the first half and
  // needs only the second (4 MiB) in, and sends only its own half out: 4 MiB / 400 GB/s each way.
  auto cluster = testing::make_test_cluster(1, 2, 2, 0).cluster();
  auto ranks = RankMap::make(cluster, {GpuId{0}, GpuId{1}, GpuId{0}, GpuId{1}}, 2).value();
  const auto placed = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const auto lb = lower_bound(halves_to_two_replicas(), placed);
  const double half = 4096.0 * 1024;
  EXPECT_NEAR(lb.gpu_ingress.value, half / 400e9, 1e-12);
  EXPECT_NEAR(lb.gpu_egress.value, half / 400e9, 1e-12);
  // It still fills all 8 MiB of its replica: the half it holds by its copies or over NVLink from
  // GPU 1, the other over NVLink: 8 MiB / (1500 + 400) GB/s, under the ingress term here.
  EXPECT_NEAR(lb.gpu_fill.value, 2 * half / 1900e9, 1e-12);
  EXPECT_EQ(lb.binding, "GPU ingress");
}

TEST(LowerBound, ALayoutKeptOnTheSameGpusIsBoundByItsCopies) {
  // Colocated ranks keeping their layout (row halves on GPUs 0 and 1 before and after): no byte
  // has to cross a link, but each GPU still writes its 4 MiB half into the destination's buffers,
  // by its copies or over NVLink from another holder (there is none): 4 MiB / (1500 + 400) GB/s.
  // Without this term the bound was 0 and a prediction thousands of times "the bound".
  auto cluster = testing::make_test_cluster(1, 2, 2, 0).cluster();
  auto ranks = RankMap::make(cluster, {GpuId{0}, GpuId{1}, GpuId{0}, GpuId{1}}, 2).value();
  const auto placed = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const Shape shape{4096, 1024};
  const auto p =
      ReshardProblem::make({testing::make_reshard("w", shape, make_layout(shape, {2}, rank_range(0, 2), "S0"),
                                                  make_layout(shape, {2}, rank_range(2, 2), "S0"))},
                           2, 2)
          .value();
  const auto lb = lower_bound(p, placed);
  const double half = 4096.0 * 1024;
  EXPECT_EQ(lb.gpu_ingress.value, 0);
  EXPECT_EQ(lb.gpu_egress.value, 0);
  EXPECT_NEAR(lb.gpu_fill.value, half / 1900e9, 1e-12);
  EXPECT_EQ(lb.binding, "GPU fill");
  EXPECT_NEAR(lb.time.value, half / 1900e9, 1e-12);
}

}  // namespace
}  // namespace refit
