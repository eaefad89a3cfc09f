// `refit run --delta` under mpirun: the training ranks' synthetic weights change step after step,
// every inference rank holds exactly each step's weights (--verify checks every step), and the
// report gives each step's bytes against a full refit's.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "mpirun.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";
// Megatron tp=2,ep=2,etp=1 (2 ranks) -> vLLM tp=2,dp=2 (4 ranks).
const std::string kProblem =
    "--model " + kModels + "tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2";

TEST(RunDelta, TwentyStepsAreEachVerifiedAndMoveOnlyWhatChanged) {
  const auto r = testing::refit_run(
      6, kProblem + " --strategy direct --delta 0.01 --iterations 20 --verify --json --timeout 20", 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["verified"], true);
  ASSERT_TRUE(j.contains("delta")) << r.out;
  EXPECT_EQ(j["delta"]["change_fraction"], 0.01);
  const auto& steps = j["delta"]["steps"];
  ASSERT_EQ(steps.size(), 20u) << r.out;
  const auto dense = steps[0]["dense_bytes"].get<std::int64_t>();
  EXPECT_GT(dense, 0);
  // Step 0 has no baseline: every piece dense, with its 56-byte header.
  EXPECT_EQ(steps[0]["full_pieces"], steps[0]["pieces"]);
  EXPECT_EQ(steps[0]["bytes"].get<std::int64_t>(), dense + 56 * steps[0]["pieces"].get<std::int64_t>());
  for (std::size_t s = 1; s < steps.size(); ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s);
    EXPECT_EQ(steps[s]["dense_bytes"].get<std::int64_t>(), dense);
    EXPECT_EQ(steps[s]["full_pieces"], 0);
    // 1 % of bf16 elements changed: about 3 bytes a change (a run's position and a 2-byte value,
    // before zstd) against 2 dense, plus 56 bytes a changed piece; the tiny model's pieces are
    // small, but all of it stays far under a fifth of dense.
    EXPECT_LT(steps[s]["bytes"].get<std::int64_t>() * 5, dense);
    EXPECT_GT(steps[s]["seconds"].get<double>(), 0.0);
  }
}

// Rank 2's first destination byte changes outside refit before step 2: its audit disagrees with
// its sender's checksum, that one piece goes dense, and every step still verifies.
TEST(RunDelta, AReceiverWhoseBytesDriftedGetsThatPieceDenseAndStaysExact) {
  const auto r = testing::refit_run(6, kProblem +
                                           " --strategy direct --delta 0.01 --iterations 4 --verify --json "
                                           "--timeout 20 --test-drift-on-rank 2");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["verified"], true);
  const auto& steps = j["delta"]["steps"];
  ASSERT_EQ(steps.size(), 4u);
  EXPECT_EQ(steps[1]["full_pieces"], 0);
  EXPECT_EQ(steps[2]["full_pieces"], 1);
  EXPECT_EQ(steps[3]["full_pieces"], 0);
}

// The refit plan on NVLink domains of two processes lands each piece once per domain and relays
// it to the other rank there: the relays forward the payloads as they arrived, in a second hop.
TEST(RunDelta, TheRefitPlanWithItsRelaysIsVerifiedEveryStep) {
  const auto r = testing::refit_run(6, kProblem +
                                           " --cluster cpu-host:gpus_per_domain=2 --delta 0.01 "
                                           "--iterations 8 --verify --json --timeout 20");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["strategy"], "refit");
  EXPECT_EQ(j["verified"], true);
  const auto& steps = j["delta"]["steps"];
  ASSERT_EQ(steps.size(), 8u);
  for (std::size_t s = 1; s < steps.size(); ++s) {
    EXPECT_EQ(steps[s]["full_pieces"], 0);
    EXPECT_LT(steps[s]["bytes"].get<std::int64_t>() * 5, steps[s]["dense_bytes"].get<std::int64_t>());
  }
}

TEST(RunDelta, AGatherBroadcastPlanIsRefusedNamingTheStrategiesThatWork) {
  const auto r = testing::refit_run(6, kProblem + " --strategy gather-broadcast --delta 0.01 --timeout 20");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("--strategy refit or direct"), std::string::npos) << r.err;
}

// --executor nccl runs the delta step on each rank's GPU (docs/delta.md, "The NCCL executor's delta
// step"). Without a GPU, or in a build without NCCL, every rank refuses at set-up naming the nccl
// executor, before any step; a machine with a GPU per rank runs it (tests/gpu checks it there).
TEST(RunDelta, TheNcclExecutorIsRefusedNamingItWhereNoGpuRunsIt) {
  const auto r = testing::refit_run(
      6, kProblem + " --strategy direct --executor nccl --delta 0.01 --iterations 2 --verify --timeout 20");
  if (r.exit_code == 0) GTEST_SKIP() << "every rank had a GPU: tests/gpu/run.sh checks the steps";
  EXPECT_NE(r.err.find("--executor"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("nccl"), std::string::npos) << r.err;
}

TEST(RunDelta, FrameworkStorageIsRefusedNamingDelta) {
  const auto r =
      testing::refit_run(6, kProblem + " --strategy direct --delta 0.01 --storage framework --timeout 20");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--delta"), std::string::npos) << r.err;
}

// The busiest training rank's payload bytes over the training ranks' mean, at one step.
double max_over_mean(const nlohmann::json& step, std::size_t training_ranks) {
  double most = 0, sum = 0;
  for (std::size_t r = 0; r < training_ranks; ++r) {
    const auto b = step["rank_bytes"][r].get<double>();
    most = std::max(most, b);
    sum += b;
  }
  return most / (sum / static_cast<double>(training_ranks));
}

// Two data-parallel training replicas, each on a node of its own, the first half of the tensors
// frozen: the refit plan balanced by dense bytes gives the frozen half's matrices to one replica,
// so after step 1 (the first delta) one replica sends nearly every changed byte: the payload
// shares drift by 1/2, every rank re-plans by step 1's payloads, step 2 sends densely the boxes
// whose sender changed, and from step 3 on both replicas carry about half. Every one of the 12
// steps is verified byte for byte; a frozen tensor sends nothing.
TEST(RunDelta, ARebalanceOnFrozenLayersChangesSendersAndEveryStepIsVerified) {
  const auto r = testing::refit_run(4,
                                    "--model " + kModels +
                                        "small-llama-blocks.json --train tp=1,dp=2 --infer tp=2 --cluster "
                                        "cpu-host:gpus_per_node=1 --delta 0.01 --delta-frozen 0.5 "
                                        "--iterations 12 --verify --json --timeout 30",
                                    180);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["verified"], true);
  const auto& steps = j["delta"]["steps"];
  ASSERT_EQ(steps.size(), 12u);
  for (std::size_t s = 0; s < steps.size(); ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s);
    EXPECT_EQ(steps[s]["rebalanced"], s == 1);
    if (s < 3) continue;
    EXPECT_EQ(steps[s]["full_pieces"], 0);
    EXPECT_GT(steps[s]["unchanged_pieces"].get<std::int64_t>(), 0);  // the frozen tensors' pieces
    EXPECT_LT(steps[s]["share_drift"].get<double>(), 0.1);
    EXPECT_LT(max_over_mean(steps[s], 2), 1.25);
  }
  EXPECT_GT(steps[1]["share_drift"].get<double>(), 0.45);
  // One replica sends every changed matrix; the replicated vectors (norms), which each inference
  // rank's domain takes from its own share of their holders (holder_share), add under 1 % from
  // the other.
  EXPECT_GT(max_over_mean(steps[1], 2), 1.95);
  EXPECT_GT(steps[2]["full_pieces"].get<std::int64_t>(), 0);
}

// --delta-rebalance 1 never re-plans: the same run keeps the dense plan's senders.
TEST(RunDelta, ARebalanceThresholdOfOneKeepsThePlan) {
  const auto r = testing::refit_run(4,
                                    "--model " + kModels +
                                        "small-llama-blocks.json --train tp=1,dp=2 --infer tp=2 --cluster "
                                        "cpu-host:gpus_per_node=1 --delta 0.01 --delta-frozen 0.5 "
                                        "--delta-rebalance 1 --iterations 4 --verify --json --timeout 30",
                                    180);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["verified"], true);
  for (const auto& step : j["delta"]["steps"]) EXPECT_EQ(step["rebalanced"], false);
  // The dense plan's senders: one replica sends every changed matrix (the replicated vectors
  // add under 1 % from the other, as above).
  EXPECT_GT(max_over_mean(j["delta"]["steps"][3], 2), 1.95);
}

// `refit run ARGS` on small-llama-blocks (--infer tp=2,engines=2) with FP8 in flight and --delta
// 0.01 --verify over `steps` iterations: it succeeds, every step verified, and every step after the
// first moves less than a dense step with no piece dense.
void expect_verified_fp8_deltas(std::int32_t processes, const std::string& args, std::size_t steps) {
  const auto r = testing::refit_run(processes,
                                    "--model " + kModels + "small-llama-blocks.json --infer tp=2,engines=2 " +
                                        args + " --delta 0.01 --iterations " + std::to_string(steps) +
                                        " --verify --json --timeout 20",
                                    120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["verified"], true);
  const auto& done = j["delta"]["steps"];
  ASSERT_EQ(done.size(), steps);
  EXPECT_EQ(done[0]["full_pieces"], done[0]["pieces"]);
  for (std::size_t s = 1; s < done.size(); ++s) {
    SCOPED_TRACE(::testing::Message() << "step " << s);
    EXPECT_EQ(done[s]["full_pieces"], 0);
    EXPECT_LT(done[s]["bytes"].get<std::int64_t>(), done[s]["dense_bytes"].get<std::int64_t>());
  }
}

// FP8 in flight with deltas: the training ranks' synthetic bf16 changes step after step, the
// senders quantize it as a dense FP8 refit does and send deltas of the fp8 values and scales, and
// --verify checks at every step that every inference rank holds what the quantizer makes of that
// step's bf16 (a dense FP8 refit's bytes). small-llama-blocks at tp=2 is whole 128x128 blocks on
// the training ranks; mxfp8 runs the refit plan with its relays, fp8-block128 a direct plan.
// A plan from a file is never re-made: --delta-rebalance is refused beside it, and the steps
// report no share drift (once 0.0 at every step, which nothing had measured).
TEST(RunDelta, APlanFromAFileMeasuresNoDriftAndTakesNoRebalanceThreshold) {
  char folder[] = "/tmp/refit-delta-plan-XXXXXX";
  ASSERT_NE(::mkdtemp(folder), nullptr);
  const std::string plan = std::string(folder) + "/p.json";
  const auto planned = testing::run_shell(std::string(REFIT_CLI_PATH) + " plan " + kProblem +
                                          " --strategy direct --cluster cpu-host --out " + plan);
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const auto refused =
      testing::refit_run(6, kProblem + " --plan " + plan + " --delta 0.01 --delta-rebalance 0.2");
  const auto r = testing::refit_run(
      6, kProblem + " --plan " + plan + " --delta 0.01 --iterations 3 --verify --json --timeout 20", 120);
  std::filesystem::remove_all(folder);
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_NE(refused.err.find("--plan excludes --delta-rebalance"), std::string::npos) << refused.err;
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["verified"], true);
  for (const auto& step : j["delta"]["steps"]) EXPECT_TRUE(step["share_drift"].is_null()) << step;
}

TEST(RunDelta, Fp8InFlightStepsAreEachVerifiedAgainstTheQuantizersBytes) {
  expect_verified_fp8_deltas(6, "--train tp=2 --quantize fp8-block128 --quantize-at sender --strategy direct",
                             6);
  expect_verified_fp8_deltas(
      6, "--train tp=2 --quantize mxfp8 --quantize-at sender --cluster cpu-host:gpus_per_domain=2", 6);
}

// At tp=4 the training ranks hold 64 of q_proj's rows, cutting its 128x128 blocks: by default such
// a weight is quantized at its landing ranks. Its bf16 landing copy moves as deltas, each landing
// rank quantizes its box once the copy is decoded, and the fp8 is forwarded as deltas to the other
// engine; --verify checks every rank's fp8 (and each landing rank's bf16 copy) at every step, for
// the direct plan and for the refit plan with its relays.
TEST(RunDelta, Fp8QuantizedAtLandingRanksIsVerifiedEveryStep) {
  expect_verified_fp8_deltas(8, "--train tp=4 --quantize fp8-block128 --strategy direct", 5);
  expect_verified_fp8_deltas(8, "--train tp=4 --quantize fp8-block128 --cluster cpu-host:gpus_per_domain=2",
                             5);
}

// Weights trained in fp8: the training ranks hold fp8 values and scales, which they make at every
// step from a bf16 master that the synthetic update changes (as an fp8 trainer does), and the delta
// refit moves the changed fp8 bytes; --verify checks at every step that every inference rank holds
// what the quantizer makes of its box of that step's master, for a direct plan (fp8-block128) and
// the refit plan with its relays (mxfp8).
TEST(RunDelta, Fp8TrainedWeightsAreVerifiedEveryStep) {
  expect_verified_fp8_deltas(
      6, "--train tp=2 --quantize fp8-block128 --quantize-at training --strategy direct", 6);
  expect_verified_fp8_deltas(
      6, "--train tp=2 --quantize mxfp8 --quantize-at training --cluster cpu-host:gpus_per_domain=2", 6);
}

}  // namespace
}  // namespace refit
