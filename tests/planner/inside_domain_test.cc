// Pieces held inside their destination's NVLink domain (planner/src/inside_domain.h), where
// training and inference share one node's GPUs: who sends each piece over NVLink.
#include <algorithm>
#include <functional>
#include <vector>

#include <gtest/gtest.h>

#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::make_reshard;
using testing::make_test_cluster;
using testing::rank_range;

// [65536, 1024] bf16, 128 MiB: a quarter takes 84 us over a test GPU's 400 GB/s of NVLink, well
// above the 26 us a relay's hop costs (5 us of latency and an 8 MiB chunk stored before it goes on).
const Shape kShape{65536, 1024};
constexpr std::int64_t kTensorBytes = 65536 * 1024 * 2;
constexpr std::int64_t kQuarter = kTensorBytes / 4;

// One 8-GPU domain with `training` ranks on GPUs 0, 1, ... and 8 inference ranks on GPUs 0-7 (the
// training job's GPUs are lent to inference: colocated).
PlacedCluster colocated(std::int32_t training) {
  auto cluster = make_test_cluster(1, 8, 0, 0).cluster();
  std::vector<GpuId> gpus;
  for (std::int32_t r = 0; r < training; ++r) gpus.push_back(GpuId{r});
  for (std::int32_t g = 0; g < 8; ++g) gpus.push_back(GpuId{g});
  auto ranks = RankMap::make(cluster, std::move(gpus), training).value();
  return PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
}

// Two inference engines of tp=4 on ranks first..first+7 (engine 0 on GPUs 0-3, engine 1 on 4-7):
// row quarter i of each tensor lands on GPUs i and 4 + i.
Layout two_engines_of_tp4(std::int32_t first) {
  return make_layout(kShape, {2, 4}, rank_range(first, 8), "R,S0");
}

PlanStats stats_of(const ReshardProblem& p, const PlacedCluster& c) {
  const auto plan = make_plan("refit", p, c);
  EXPECT_TRUE(plan) << plan.error().message;
  const auto ok = validate(*plan, p);
  EXPECT_TRUE(ok) << ok.error().message;
  return compute_stats(*plan, c);
}

TEST(InsideDomain, EveryHolderOfAPieceTakesItsTurnToSendIt) {
  // x is replicated on the 4 training ranks (data parallel) on GPUs 0-3. GPU i copies quarter i
  // from the rank beside it; GPU 4 + i needs it over NVLink. Sent by the first holder each time,
  // GPU 0 would send all 4 quarters (128 MiB); each holder sends the one beside it instead.
  const auto p =
      ReshardProblem::make(
          {make_reshard("x", kShape, make_layout(kShape, {4}, rank_range(0, 4), "R"), two_engines_of_tp4(4))},
          4, 8)
          .value();
  const auto s = stats_of(p, colocated(4));
  EXPECT_EQ(s.local_bytes.value, kTensorBytes);  // quarter i on GPU i, i = 0..3
  for (std::size_t g = 0; g < 4; ++g) EXPECT_EQ(s.nvlink_egress[g].value, kQuarter) << "GPU " << g;
  for (std::size_t g = 4; g < 8; ++g) EXPECT_EQ(s.nvlink_ingress[g].value, kQuarter) << "GPU " << g;
}

TEST(InsideDomain, APieceThatMovesInLessThanAHopGoesStraightFromItsHolders) {
  // As below with 8 MiB tensors: a quarter moves in 5 us, less than the 26 us a relay's hop costs,
  // so every piece goes from its holders, 3 quarters each, and nothing is passed on.
  const Shape small{4096, 1024};
  const auto engines = make_layout(small, {2, 4}, rank_range(4, 8), "R,S0");
  const auto p = ReshardProblem::make(
                     {make_reshard("x", small, make_layout(small, {2}, rank_range(0, 2), "R"), engines),
                      make_reshard("y", small, make_layout(small, {2}, rank_range(2, 2), "R"), engines)},
                     4, 8)
                     .value();
  const auto s = stats_of(p, colocated(4));
  const std::int64_t quarter = 4096 * 1024 * 2 / 4;
  for (std::size_t g = 0; g < 4; ++g) EXPECT_EQ(s.nvlink_egress[g].value, 3 * quarter) << "GPU " << g;
  for (std::size_t g = 4; g < 8; ++g) EXPECT_EQ(s.nvlink_egress[g].value, 0) << "GPU " << g;
}

TEST(InsideDomain, AReplicaOnAGpuThatHoldsNothingPassesThePieceOn) {
  // Two pipeline stages, each replicated twice: x on GPUs 0 and 1, y on GPUs 2 and 3; both engines
  // need every quarter of both. Over NVLink go x's quarters to GPUs 2, 3, 4, 5, 6, 7 and y's to 0,
  // 1, 4, 5, 6, 7: 12 quarters. Sent by their holders only, GPUs 0-3 send 3 quarters each:
  //   x: q0 -> 4, q1 -> 5 (one holder each), q2 -> 2 and 6, q3 -> 3 and 7 (both holders).
  // GPUs 4-7 hold nothing: passing on x's q2 and q3 (GPU 6 to 2, GPU 7 to 3) and y's q0 and q1
  // (GPU 4 to 0, GPU 5 to 1) leaves every holder 2 quarters and GPUs 4-7 one each. GPUs 4-7 take
  // in 2 quarters each (a quarter of x and of y): the sends are now within that, the bound.
  // x is planned first. Had the loads started at 0, GPU 2 (idle until then) would pass x's q2 on
  // to GPU 6, and then send y's q2 and a share of y's q0 as y's holder: 3 quarters. They start at
  // what each holder would send of its own pieces, so GPU 2 looks busy from the start.
  const auto p =
      ReshardProblem::make(
          {make_reshard("x", kShape, make_layout(kShape, {2}, rank_range(0, 2), "R"), two_engines_of_tp4(4)),
           make_reshard("y", kShape, make_layout(kShape, {2}, rank_range(2, 2), "R"), two_engines_of_tp4(4))},
          4, 8)
          .value();
  const auto s = stats_of(p, colocated(4));
  EXPECT_EQ(s.local_bytes.value, 4 * kQuarter);
  EXPECT_EQ(s.nvlink_bytes.value, 12 * kQuarter);
  for (std::size_t g = 0; g < 4; ++g) EXPECT_EQ(s.nvlink_egress[g].value, 2 * kQuarter) << "GPU " << g;
  for (std::size_t g = 4; g < 8; ++g) {
    EXPECT_EQ(s.nvlink_egress[g].value, kQuarter) << "GPU " << g;
    EXPECT_EQ(s.nvlink_ingress[g].value, 2 * kQuarter) << "GPU " << g;
  }
}

TEST(InsideDomain, AHolderDoneByTheTimeItsReceiversAreSendsEveryReplicaItself) {
  // Training TP4 on GPUs 0-3 (row quarter i on GPU i) -> two engines of TP2 on GPUs 4-5 and 6-7,
  // one 8-GPU domain. Quarter i goes to GPUs 4 + i / 2 and 6 + i / 2: each holder sends 2
  // quarters, and each inference GPU takes in 2 quarters however they come, so no sending ends
  // before 2 quarters' time. The holders are done by then: a replica passing a quarter on would
  // add a hop and gain nothing (before the floor, the second replica of each quarter was served
  // by the first, because holders looked busier than idle GPUs 4-7).
  auto cluster = make_test_cluster(1, 8, 0, 0).cluster();
  std::vector<GpuId> gpus;
  for (std::int32_t g = 0; g < 8; ++g) gpus.push_back(GpuId{g});
  auto ranks = RankMap::make(cluster, std::move(gpus), 4).value();
  const auto apart = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const auto p =
      ReshardProblem::make({make_reshard("x", kShape, make_layout(kShape, {4}, rank_range(0, 4), "S0"),
                                         make_layout(kShape, {2, 2}, rank_range(4, 4), "R,S0"))},
                           4, 4)
          .value();
  const auto s = stats_of(p, apart);
  EXPECT_EQ(s.nvlink_bytes.value, 8 * kQuarter);
  for (std::size_t g = 0; g < 4; ++g) EXPECT_EQ(s.nvlink_egress[g].value, 2 * kQuarter) << "GPU " << g;
  for (std::size_t g = 4; g < 8; ++g) {
    EXPECT_EQ(s.nvlink_egress[g].value, 0) << "GPU " << g;
    EXPECT_EQ(s.nvlink_ingress[g].value, 2 * kQuarter) << "GPU " << g;
  }
}

TEST(InsideDomain, WhatAReplicaPassesOnLeadsWhatItsHolderSendsIt) {
  // Training rank 0 on GPU 0 holds y and x (128 MiB each); the 8 inference ranks on GPUs 0-7 each
  // need an eighth of y (rows) and all of x. GPU 0 scatters x in 7 slabs, one to each other GPU,
  // which passes its slab on to the other 6; its eighth of y only lands. The pair 0 -> g carries
  // both, and the slab goes first: the replica passes it on while y lands. In one message, y
  // (made first) went first, and the 6 receivers of each slab waited for it (GPU 0's port is the
  // busiest: Qwen3-30B-A3B EP8 -> 16 engines of TP1 in one GB200 domain took 1.46x its bound).
  const auto p =
      ReshardProblem::make({make_reshard("y", kShape, make_layout(kShape, {1}, rank_range(0, 1), "R"),
                                         make_layout(kShape, {8}, rank_range(1, 8), "S0")),
                            make_reshard("x", kShape, make_layout(kShape, {1}, rank_range(0, 1), "R"),
                                         make_layout(kShape, {8}, rank_range(1, 8), "R"))},
                           1, 8)
          .value();
  const auto plan = make_plan("refit", p, colocated(1));
  ASSERT_TRUE(plan) << plan.error().message;
  const auto ok = validate(*plan, p);
  ASSERT_TRUE(ok) << ok.error().message;
  std::vector<bool> forwarded(plan->transfers.size(), false);
  for (const auto& t : plan->transfers)
    for (const auto& seg : t.segments)
      if (seg.via >= 0) forwarded[static_cast<std::size_t>(seg.via)] = true;
  for (std::int32_t g = 1; g < 8; ++g) {
    std::vector<bool> pair;  // forwarded or not, the pair 0 -> GPU g's transfers in plan order
    for (const auto& t : plan->transfers)
      if (t.sender == Rank{0} && t.receiver == Rank{1 + g})
        pair.push_back(forwarded[static_cast<std::size_t>(t.id)]);
    ASSERT_GE(pair.size(), 2u) << "GPU " << g;
    EXPECT_TRUE(std::ranges::is_sorted(pair, std::greater<>{}))
        << "GPU " << g << ": a slab after what only lands";
    EXPECT_TRUE(pair.front()) << "GPU " << g;
    EXPECT_FALSE(pair.back()) << "GPU " << g;
  }
}

}  // namespace
}  // namespace refit
