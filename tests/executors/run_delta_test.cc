// `refit run --delta` under mpirun: the training ranks' synthetic weights change step after step,
// every inference rank holds exactly each step's weights (--verify checks every step), and the
// report gives each step's bytes against a full refit's.
#include <gtest/gtest.h>

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
// it to the other rank there: the relays forward, in a second round, what they decoded.
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

TEST(RunDelta, FrameworkStorageIsRefusedNamingDelta) {
  const auto r =
      testing::refit_run(6, kProblem + " --strategy direct --delta 0.01 --storage framework --timeout 20");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--delta"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace refit
