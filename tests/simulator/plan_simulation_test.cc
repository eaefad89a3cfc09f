// simulate_plan: the translation of plans into flows, checked against closed-form times.
#include <random>

#include <gtest/gtest.h>

#include "refit/core/quantized_problem.h"
#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

constexpr double kNicBw = 50e9;   // test cluster NICs: 50 GB/s
constexpr double kAlpha = 15e-6;  // network latency per message

// An 8 MiB bf16 weight [4096, 1024] whole on one training GPU and on one inference GPU.
ReshardProblem one_weight() {
  return ReshardProblem::make(
             {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {1}, rank_range(0, 1), "R"),
                                    make_layout({4096, 1024}, {1}, rank_range(1, 1), "R"))},
             1, 1)
      .value();
}

TEST(PlanSimulation, OneMessageTakesLatencyPlusBytesOverBandwidth) {
  // 8 MiB from one training GPU to one inference GPU on another node: one network message,
  // contiguous on both sides, so no pack: alpha + bytes / NIC bandwidth.
  const auto p = one_weight();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto s = simulate_plan(make_plan("refit", p, c).value(), p, c).value();
  EXPECT_NEAR(s.predicted.value, kAlpha + 4096.0 * 1024 * 2 / kNicBw, 1e-9);
  EXPECT_NEAR(s.breakdown[TimeKind::kNetwork].value + s.breakdown[TimeKind::kLatency].value,
              s.predicted.value, 1e-12);
}

TEST(PlanSimulation, SaysWhatItsClusterAssumed) {
  // A cluster says what it assumed (as a preset of a GPU refit's kernels have not run on does, set
  // here by hand); every prediction on it repeats that, and one on a cluster that assumes nothing
  // says nothing.
  const auto p = one_weight();
  const auto plain = testing::make_test_cluster(2, 1, 1, 1);
  const auto plan = make_plan("refit", p, plain).value();
  EXPECT_TRUE(simulate_plan(plan, p, plain).value().assumptions.empty());
  auto spec = plain.cluster().spec();
  spec.assumptions = {"copies at 1500 GB/s, as no kernel was measured"};
  const auto assumed = PlacedCluster::make(Cluster::make(std::move(spec)).value(), plain.ranks()).value();
  EXPECT_EQ(simulate_plan(plan, p, assumed).value().assumptions,
            (std::vector<std::string>{"copies at 1500 GB/s, as no kernel was measured"}));
}

TEST(PlanSimulation, RefusesATransferFromARankThePlanDoesNotHave) {
  // The plan has ranks 0 and 1; a sender of rank 7 would index the cluster out of range, so the
  // plan's structural check refuses it first, naming the transfer and the rank.
  const auto p = one_weight();
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  auto plan = make_plan("refit", p, c).value();
  plan.transfers[0].sender = Rank{7};
  const auto refused = simulate_plan(plan, p, c);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("transfers[0]"), std::string::npos) << refused.error().message;
  EXPECT_NE(refused.error().message.find("rank 7 does not exist (2 ranks)"), std::string::npos)
      << refused.error().message;
}

// FP8 in flight: the same weight from one GPU to one on another node.
ReshardProblem one_weight_quantized(QuantSite site) {
  return quantize_problem(one_weight(), {.scheme = QuantScheme::kFp8Block128, .site = site},
                          [](const TensorSpec&) { return true; })
      .value();
}

TEST(PlanSimulation, QuantizingAtTheSenderSendsHalfTheBytesAfterOnePassOverTheWeight) {
  // The sender quantizes its 8 MiB of bf16 first. The test GPU copies at 1500 GB/s and has no
  // quantize rate, so it reads bf16 1970 / 1122 times as fast as it copies, as refit's kernels did
  // on an H100 (measured_kernels.cc): 8 MiB / (1500 GB/s * 1970 / 1122). Then 4 MiB of fp8 and
  // 32 x 8 fp32 scales (1 KiB) cross the network as one message: alpha + (4 MiB + 1 KiB) / 50 GB/s.
  const auto p = one_weight_quantized(QuantSite::kSender);
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto s = simulate_plan(make_plan("refit", p, c).value(), p, c).value();
  const double bf16 = 4096.0 * 1024 * 2, quantize = bf16 / (1500e9 * 1970 / 1122);
  EXPECT_NEAR(s.breakdown[TimeKind::kQuantize].value, quantize, 1e-12);
  EXPECT_NEAR(s.predicted.value, quantize + kAlpha + (bf16 / 2 + 32 * 8 * 4) / kNicBw, 1e-9);
  const auto stats = compute_stats(make_plan("refit", p, c).value(), c);
  EXPECT_EQ(stats.network_bytes.value, 4096 * 1024 + 32 * 8 * 4);
  EXPECT_EQ(stats.network_bytes_unquantized.value, 4096 * 1024 * 2);
}

// Two 8 MiB bf16 weights whole on training rank 0, w1 needed on rank 1 and w2 on rank 2,
// quantized at the sender.
ReshardProblem two_weights_quantized_at_sender() {
  const auto layout = [](std::int32_t first) {
    return make_layout({4096, 1024}, {1}, rank_range(first, 1), "R");
  };
  const auto bf16 = ReshardProblem::make({testing::make_reshard("w1", {4096, 1024}, layout(0), layout(1)),
                                          testing::make_reshard("w2", {4096, 1024}, layout(0), layout(2))},
                                         1, 2)
                        .value();
  return quantize_problem(bf16, {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kSender},
                          [](const TensorSpec&) { return true; })
      .value();
}

TEST(PlanSimulation, ASendersQuantizationOfItsSecondBoxOverlapsItsFirstSend) {
  // Two 8 MiB bf16 weights from training rank 0 to ranks 1 and 2 (above), each rank on a node of
  // its own. Each pair starts at once, so the sender
  // quantizes by tensor: w1 (q, as above), then w2 (q more). w1's fp8 (b = 4 MiB + 1 KiB of
  // scales) leaves at q, alone on the sender's NIC until w2's joins at 2q; from then on the two
  // share it, and it stays busy until both have gone: the end is q + alpha + 2b / 50 GB/s,
  // where quantizing both boxes before the first send would take 2q + alpha + 2b / 50 GB/s.
  const auto p = two_weights_quantized_at_sender();
  const auto c = testing::make_test_cluster(3, 1, 1, 2);
  PlanSimulationOptions o;
  o.rate_tolerance = 0;
  const auto s = simulate_plan(make_plan("refit", p, c).value(), p, c, o).value();
  const double q = 4096.0 * 1024 * 2 / (1500e9 * 1970 / 1122);
  const double b = 4096.0 * 1024 + 32 * 8 * 4;
  EXPECT_NEAR(s.predicted.value, q + kAlpha + 2 * b / kNicBw, 1e-9);
  EXPECT_NEAR(s.breakdown[TimeKind::kQuantize].value, q, 1e-12);  // on the critical path: w1's only
}

TEST(PlanSimulation, OnOneHostASenderQuantizesAndPutsInTurn) {
  // The two weights of the test above, from process 0 to processes 1 and 2 of one host (as
  // `refit calibrate` describes it: shared memory behind one 50 GB/s NIC, a quantizer of 1 GB/s of
  // bf16, so q = 8 MiB / 1 GB/s). refit's UCX executor quantizes each box on the thread that
  // makes its puts, and between processes of one node a put is that thread's own copy, so the two
  // take turns: w1 (q), its put (b / 50 GB/s), then w2 (q),
  // its put: 2q + 2b / 50 GB/s, where the nodes above overlap w2's quantization with w1's send.
  // Each message's latency (alpha < q) is paid while its box is quantized, as a stream's messages
  // pay theirs while the ones before them flow.
  const auto p = two_weights_quantized_at_sender();
  const auto c = testing::make_test_host(3, 1, 2);
  PlanSimulationOptions o;
  o.rate_tolerance = 0;
  const auto s = simulate_plan(make_plan("refit", p, c).value(), p, c, o).value();
  const double q = 4096.0 * 1024 * 2 / 1e9;
  const double b = 4096.0 * 1024 + 32 * 8 * 4;
  EXPECT_NEAR(s.predicted.value, 2 * q + 2 * b / kNicBw, 1e-9);
  EXPECT_NEAR(s.breakdown[TimeKind::kQuantize].value, 2 * q, 1e-12);  // both boxes on the critical path
}

TEST(PlanSimulation, QuantizingAtTheReceiverSendsBf16ThenQuantizesWhatLanded) {
  // bf16 crosses (alpha + 8 MiB / 50 GB/s), then the receiver quantizes its 8 MiB at the rate of
  // the test above.
  const auto p = one_weight_quantized(QuantSite::kReceiver);
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto s = simulate_plan(make_plan("refit", p, c).value(), p, c).value();
  const double bf16 = 4096.0 * 1024 * 2, quantize = bf16 / (1500e9 * 1970 / 1122);
  EXPECT_NEAR(s.predicted.value, kAlpha + bf16 / kNicBw + quantize, 1e-9);
  EXPECT_NEAR(s.breakdown[TimeKind::kQuantize].value, quantize, 1e-12);
}

TEST(PlanSimulation, RingRelayPipelinesByChunk) {
  // m2n-ring with one source and a destination replicated on h = 4 single-GPU domains: the
  // source feeds domain 1, which forwards to 2, 3, 4 in 256 KiB chunks. Chained pipelining:
  // h*alpha + bytes/bw + (h-1)*chunk/bw.
  const std::int32_t h = 4;
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {1}, rank_range(0, 1), "R"),
                                 make_layout({4096, 1024}, {h}, rank_range(1, h), "R"))},
          1, h)
          .value();
  const auto c = testing::make_test_cluster(h + 1, 1, 1, h);
  const auto s = simulate_plan(make_plan("m2n-ring", p, c).value(), p, c).value();
  const double bytes = 4096.0 * 1024 * 2, chunk = 256 << 10;
  EXPECT_NEAR(s.predicted.value, h * kAlpha + bytes / kNicBw + (h - 1) * chunk / kNicBw, 1e-7);
}

TEST(PlanSimulation, NeverFasterThanTheLowerBound) {
  // Random layouts of a few large tensors over 2..4 nodes: whatever the strategy, the prediction
  // is at least the lower bound (destination NIC receive, source NIC send, GPU ingress).
  std::mt19937_64 rng(5);
  for (int i = 0; i < 40; ++i) {
    const std::int32_t nodes = 2 + static_cast<std::int32_t>(rng() % 3),
                       per = 1 + static_cast<std::int32_t>(rng() % 4);
    const std::int32_t src = per * (1 + static_cast<std::int32_t>(rng() % (nodes - 1)));
    const std::int32_t dst = nodes * per - src;
    const char* src_p[] = {"S0", "S1", "R"};
    const char* dst_p[] = {"S0", "S1", "R"};
    const auto p =
        ReshardProblem::make(
            {testing::make_reshard("w", {2048, 2048},
                                   make_layout({2048, 2048}, {src}, rank_range(0, src), src_p[rng() % 3]),
                                   make_layout({2048, 2048}, {dst}, rank_range(src, dst), dst_p[rng() % 3]))},
            src, dst)
            .value();
    const auto c = testing::make_test_cluster(nodes, per, src, dst);
    const auto lb = lower_bound(p, c);
    for (auto name : strategy_names()) {
      const auto s = simulate_plan(make_plan(name, p, c).value(), p, c).value();
      EXPECT_GE(s.predicted.value, lb.time.value * (1 - 1e-9)) << name << " case " << i;
    }
  }
}

TEST(PlanSimulation, RefitBeatsTheBaselinesWhenReplicasShareADomain) {
  // Two replicas of each destination shard per domain: refit crosses the network once per
  // domain and completes the other replica over NVLink; direct sends both over the network.
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {8192, 1024}, make_layout({8192, 1024}, {4}, rank_range(0, 4), "S0"),
                                 make_layout({8192, 1024}, {2, 2}, rank_range(4, 4), "R,S0"))},
          4, 4)
          .value();
  const auto c = testing::make_test_cluster(2, 4, 4, 4);
  const auto refit = simulate_plan(make_plan("refit", p, c).value(), p, c).value();
  const auto direct = simulate_plan(make_plan("direct", p, c).value(), p, c).value();
  const auto gather = simulate_plan(make_plan("gather-broadcast", p, c).value(), p, c).value();
  EXPECT_LT(refit.predicted, direct.predicted);
  EXPECT_LT(refit.predicted, gather.predicted);
}

}  // namespace
}  // namespace refit
