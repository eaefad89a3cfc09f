// Delta refit with FP8 in flight through the UCX executor, ranks as threads: quantized at the
// senders, at the landing ranks or trained in fp8, after every step every inference rank holds
// exactly what a dense FP8 refit of that step's weights gives, while what moves is what changed.
#include <algorithm>

#include <gtest/gtest.h>

#include "delta_steps.h"

namespace refit {
namespace {

using namespace delta_steps;  // NOLINT(google-build-using-namespace): the tests' own scaffolding

// FP8 in flight: the training ranks hold bf16 weights that the update changes, the senders
// quantize them at every step as a dense FP8 refit does and send deltas of the fp8 values and
// scales against the fp8 they last sent. quantized_test_problem: w.weight [256, 512] by rows ->
// columns twice (replicas), stacked experts with ragged blocks, a bf16 norm. After every step,
// every receiver holds what the quantizer makes of that step's bf16 (SyntheticShards::verify), for
// both schemes, a direct plan and a refit plan whose relays forward fp8 they decoded.
TEST(DeltaExecutor, Fp8InFlightLeavesEveryReceiverWithTheQuantizersBytesAtEveryStep) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  for (const auto scheme : all_quant_schemes())
    for (const auto* strategy : {"direct", "refit"}) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      const auto problem = testing::quantized_test_problem(scheme);
      const auto plan = testing::plan_for(problem, cluster, strategy, Bytes{4096});
      // The refit plan relays the experts' fp8 to the replica on the same node (ranks 2 and 3).
      EXPECT_EQ(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return !t.upstream().empty(); }),
                std::string_view(strategy) == "refit");
      const auto steps = run_steps(problem, plan, Scenario{.change_fraction = 0.02, .steps = 12});
      for_each_exact_step(steps, [&](std::int32_t r, std::int32_t s, const Step& step) {
        // After the first (dense) step every piece has a baseline both ends agree on.
        if (s > 0) EXPECT_EQ(delta_of(step).full, 0);
        // A sender quantized before it encoded (a receiver has nothing to quantize).
        EXPECT_EQ(step.report.work.quantize.has_value(), r < 2);
      });
    }
}

// After the last delta step: a dense FP8 refit of the same bf16 (QuantizingExecutor over UCX, into
// fresh destination buffers) gives every receiver byte for byte what the delta refit left it.
std::function<void(std::int32_t, Bootstrap&, const RankBuffers&)> equals_dense_fp8(
    const ReshardProblem& problem, const Plan& plan) {
  return [&problem, &plan](std::int32_t r, Bootstrap& bootstrap, const RankBuffers& delta) {
    const ExecutorOptions options{.timeout = Seconds{20}};
    auto ucx = make_ucx_executor(bootstrap, options);
    ASSERT_TRUE(ucx) << ucx.error().message;
    QuantizingExecutor dense(std::move(*ucx), bootstrap, options.staging);
    RankBuffers fresh = delta;
    std::vector<std::vector<std::byte>> memory;
    for (auto& d : fresh.destinations) d.bytes = memory.emplace_back(d.bytes.size());
    auto prepared = dense.prepare(plan, Rank{r}, fresh);
    ASSERT_TRUE(prepared) << prepared.error().message;
    ASSERT_TRUE(dense.execute(**prepared));
    for (std::size_t i = 0; i < fresh.destinations.size(); ++i)
      EXPECT_TRUE(std::ranges::equal(fresh.destinations[i].bytes, delta.destinations[i].bytes))
          << "rank " << r << ": tensor " << problem.tensors()[delta.destinations[i].tensor].tensor.name;
  };
}

// The same invariant against the dense path itself, after 8 delta steps of a relayed plan.
TEST_P(DeltaExecutorMemory, Fp8DeltasEqualADenseFp8RefitOfTheSameWeights) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  for (const auto scheme : all_quant_schemes()) {
    SCOPED_TRACE(quant_scheme_name(scheme));
    const auto problem = testing::quantized_test_problem(scheme);
    const auto plan = testing::plan_for(problem, cluster, "refit", Bytes{4096});
    const auto steps = run_steps(problem, plan,
                                 Scenario{.change_fraction = 0.05,
                                          .steps = 8,
                                          .after_steps = equals_dense_fp8(problem, plan),
                                          .memory = GetParam()});
    for (const auto& rank : steps)
      for (const auto& step : rank) ASSERT_FALSE(step.error) << step.error->message;
  }
}

// Weights trained in fp8: the training ranks hold the fp8 values and scales, which an fp8 trainer
// makes at every step from its bf16 master (SyntheticShards: the update on the master, then the
// quantizer of the rank's box, whole blocks). The delta executor moves them as plain bytes, encoded
// against what it last sent, and quantizes nothing. quantized_test_problem trained in fp8, both
// schemes, a direct plan and a refit plan that relays: after every one of 12 steps every receiver
// holds what the quantizer makes of its box of that step's master (blocks are whole on both sides,
// so it is the training rank's bytes of the box), no piece goes dense after the first step, and a
// step sends less than the dense bytes; after the last, a dense refit of the same fp8 into fresh
// buffers gives the same bytes.
TEST(DeltaExecutor, WeightsTrainedInFp8MoveAsDeltasOfTheirBytesExactlyAtEveryStep) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  for (const auto scheme : all_quant_schemes())
    for (const auto* strategy : {"direct", "refit"}) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      const auto problem = testing::quantized_test_problem(scheme, QuantSite::kTraining);
      ASSERT_EQ(problem.tensors().front().tensor.quantization->site, QuantSite::kTraining);
      const auto plan = testing::plan_for(problem, cluster, strategy, Bytes{4096});
      EXPECT_EQ(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return !t.upstream().empty(); }),
                std::string_view(strategy) == "refit");
      const auto steps = run_steps(
          problem, plan,
          Scenario{.change_fraction = 0.02, .steps = 12, .after_steps = equals_dense_fp8(problem, plan)});
      for_each_exact_step(steps, [&](std::int32_t, std::int32_t s, const Step& step) {
        EXPECT_FALSE(step.report.work.quantize.has_value());
        if (s == 0 || delta_of(step).pieces == 0) return;
        EXPECT_EQ(delta_of(step).full, 0);
        EXPECT_LT(step.report.bytes_sent, delta_of(step).dense_bytes);
      });
    }
}

// A failed FP8 step (every receiver fails after its payloads landed) leaves each receiver with the
// previous step's fp8, and a drifted fp8 byte at a receiver makes that piece dense; the steps after
// each repair every byte.
TEST(DeltaExecutor, Fp8AFailedStepLeavesNoHalfDeltaAndDriftIsRepaired) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  const auto problem = testing::quantized_test_problem(QuantScheme::kFp8Block128);
  const auto plan = testing::plan_for(problem, cluster, "direct", Bytes{4096});
  std::vector<std::vector<std::vector<std::byte>>> held(6, std::vector<std::vector<std::byte>>(2));
  Scenario sc{.steps = 6,
              .before_step =
                  [&](std::int32_t r, std::int32_t s, RankBuffers& b) {
                    if (s == 2 || s == 3)
                      held[static_cast<std::size_t>(r)][static_cast<std::size_t>(s - 2)] =
                          destination_bytes(b);
                    if (r == 3 && s == 4) b.destinations.front().bytes[0] ^= std::byte{0x10};
                  },
              .fail_step = [](std::int32_t r, std::int32_t s) { return s == 2 && r >= 2; }};
  const auto steps = run_steps(problem, plan, sc);
  for (std::int32_t r = 2; r < 6; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    const auto& failed = steps[static_cast<std::size_t>(r)][2];
    ASSERT_TRUE(failed.error);
    EXPECT_EQ(held[static_cast<std::size_t>(r)][0], held[static_cast<std::size_t>(r)][1]);
    for (const std::size_t s : {3u, 4u, 5u}) {
      ASSERT_FALSE(steps[static_cast<std::size_t>(r)][s].error);
      EXPECT_FALSE(steps[static_cast<std::size_t>(r)][s].wrong) << "step " << s;
    }
  }
  // Step 4: only rank 3's drifted piece of w.weight goes dense (its sender, training rank 0 or 1).
  std::int64_t full = 0;
  for (std::int32_t r = 0; r < 2; ++r) full += delta_of(steps[static_cast<std::size_t>(r)][4]).full;
  EXPECT_EQ(full, 1);
}

// cut.weight [256, 96]: training ranks 0-3 hold 24 columns each, cutting its 128x128 (one ragged
// 128x96 per 128 rows) and its 1x32 blocks, so it is quantized at its landing ranks (one replica
// of the inference layout, rows over ranks 4-5 or 6-7). A step moves the bf16 landing copy as deltas, each
// landing rank quantizes its box at the start of the next round, and the fp8 goes to the other replica as
// deltas in the round after. Every step, every inference rank holds what the quantizer makes of that step's
// bf16 (and the landing ranks their copy's bf16), and after 8 steps exactly what a dense FP8 refit gives.
ReshardProblem landing_problem(QuantScheme scheme) {
  const Shape w{256, 96};
  const auto bf16 =
      ReshardProblem::make({make_reshard("cut.weight", w, make_layout(w, {4}, rank_range(0, 4), "S1"),
                                         make_layout(w, {2, 2}, rank_range(4, 4), "R,S0"))},
                           4, 4)
          .value();
  return quantize_problem(bf16, {.scheme = scheme, .site = QuantSite::kLanding},
                          [](const TensorSpec&) { return true; })
      .value();
}

TEST(DeltaExecutor, Fp8AtLandingRanksMovesTheCopyAsDeltasAndEveryStepIsExact) {
  const auto cluster = testing::make_test_cluster(4, 2, 4, 4);
  for (const auto scheme : all_quant_schemes())
    for (const auto* strategy : {"direct", "refit"}) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      const auto problem = landing_problem(scheme);
      const auto plan = testing::plan_for(problem, cluster, strategy, Bytes{4096});
      ASSERT_TRUE(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return t.quantizes(); }));
      const auto steps = run_steps(
          problem, plan,
          Scenario{.change_fraction = 0.02, .steps = 8, .after_steps = equals_dense_fp8(problem, plan)});
      for_each_exact_step(steps, [&](std::int32_t, std::int32_t s, const Step& step) {
        if (s > 0) EXPECT_EQ(delta_of(step).full, 0);
      });
    }
}

// Re-balancing a plan with landing ranks. 8 weights [8192, 192] bf16 (3 MiB) held by two
// data-parallel training replicas (ranks 0-1 and 2-3, each rank its own node and NIC), split by
// columns within each (96 columns: the 128 x 128 blocks are cut), so each is quantized at its
// landing ranks, the inference ranks 4-7 (by rows: whole blocks; one replica, so the fp8 goes
// nowhere after the quantize step). The dense plan sends the first weights' landing copies from
// one replica and the rest from the other; with the first half of the weights frozen, step 1 (the
// first delta) finds the payload on one replica: its shares drift (the fp8 the landing ranks make
// moves nothing: it weighs 0), every rank re-plans by the payloads (the planner weighs the landing
// copies by them), and the new plan spreads the changing copies over both replicas. Every step
// leaves every inference rank with the quantizer's bytes of that step's bf16 (and its landing copy),
// and from step 3 the two replicas' payloads are within a tenth of even.
ReshardProblem replicated_landing_problem() {
  const Shape w{8192, 192};
  std::vector<TensorReshard> tensors;
  for (int t = 0; t < 8; ++t)
    tensors.push_back(make_reshard("t" + std::to_string(t) + ".weight", w,
                                   make_layout(w, {2, 2}, rank_range(0, 4), "R,S1"),
                                   make_layout(w, {4}, rank_range(4, 4), "S0")));
  return quantize_problem(ReshardProblem::make(std::move(tensors), 4, 4).value(),
                          {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding},
                          [](const TensorSpec&) { return true; })
      .value();
}

TEST(DeltaExecutor, ARebalanceOfAPlanWithLandingRanksChangesSendersAndEveryStepStaysExact) {
  const auto problem = replicated_landing_problem();
  const auto cluster = testing::make_test_cluster(8, 1, 4, 4);
  ASSERT_TRUE(std::ranges::any_of(testing::plan_for(problem, cluster, "refit", Bytes{1 << 20}).transfers,
                                  [](const Transfer& t) { return t.quantizes(); }));
  const auto steps = rebalanced_at_step_1(problem, cluster);
  EXPECT_NEAR(max_over_mean(steps, 1, 2), 2.0, 1e-9);
  for (std::size_t s = 3; s < 8; ++s) EXPECT_LT(max_over_mean(steps, s, 2), 1.1) << "step " << s;
}

}  // namespace
}  // namespace refit
