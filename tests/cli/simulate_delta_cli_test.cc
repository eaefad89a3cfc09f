// refit simulate --delta: a delta refit's step predicted beside each row refit's executors run,
// its parts adding up, at every FP8 site, and a change fraction outside [0, 1] refused.
#include <map>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

// A tiny Qwen3-MoE (8 experts) from Megatron TP2xEP2 (4 ranks) to vLLM TP2xDP2 (4 ranks) on
// 2-GPU nodes, so data crosses the network and NVLink.
const std::string kProblem = std::string("--model ") + REFIT_TEST_DATA_DIR +
                             "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2 "
                             "--cluster dgx-h100:gpus_per_node=2";

// --compare --delta: the direct plan and the refit plan (which relays, in rounds) as refit's
// executors run them get a delta prediction whose parts add up (encode + transfer + decode, each
// the sum over the rounds) and which moves under a tenth of dense at 2 % changed; baselines get
// none.
TEST(SimulateDeltaCli, CompareShowsDenseAndDeltaSideBySide) {
  const auto r = run_refit("simulate " + kProblem + " --compare --delta 0.02 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  std::set<std::string> with_delta;
  for (const auto& row : j["strategies"]) {
    if (!row.contains("delta")) continue;
    with_delta.insert(row["strategy"].get<std::string>());
    EXPECT_EQ(row["deployment"], "refit");
    const auto& d = row["delta"];
    EXPECT_EQ(d["change_fraction"], 0.02);
    EXPECT_LT(d["moved_bytes"].get<double>() * 10, d["dense_bytes"].get<double>());
    EXPECT_NEAR(d["predicted_s"].get<double>(),
                d["encode_s"].get<double>() + d["transfer_s"].get<double>() + d["decode_s"].get<double>(),
                1e-12);
    double transfer = 0;
    for (const auto& round : d["rounds"]) transfer += round["transfer_s"].get<double>();
    EXPECT_NEAR(d["transfer_s"].get<double>(), transfer, 1e-12);
    EXPECT_NEAR(d["time_vs_dense"].get<double>(),
                d["predicted_s"].get<double>() / row["predicted_s"].get<double>(), 1e-9);
  }
  EXPECT_TRUE(with_delta.contains("refit"));
  EXPECT_TRUE(with_delta.contains("direct"));
  EXPECT_EQ(r.err.find("--delta: no delta refit of refit as refit runs it"), std::string::npos) << r.err;

  const auto table = run_refit("simulate " + kProblem + " --compare --delta 0.02");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("delta refit, 2 % of the elements changed"), std::string::npos) << table.out;
}

// --strategy refit --delta: the refit plan lands each piece once per inference node and its relays
// forward it over NVLink, whole boxes as they arrived, so its delta step is one round (one pass of
// the codec) of two hops or more (from the training ranks, then the relays), moving something.
TEST(SimulateDeltaCli, TheRefitPlansRelaysForwardInHopsOfOneRound) {
  const auto r = run_refit("simulate " + kProblem + " --strategy refit --delta 0.02 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto& row = j["strategies"].at(0);
  ASSERT_TRUE(row.contains("delta")) << r.out;
  const auto& rounds = row["delta"]["rounds"];
  ASSERT_EQ(rounds.size(), 1U);
  EXPECT_GE(rounds[0]["hops"].get<int>(), 2);
  EXPECT_GT(rounds[0]["moved_bytes"].get<double>(), 0.0);
  EXPECT_GT(rounds[0]["transfer_s"].get<double>(), 0.0);
}

// --delta with --quantize: the fp8 values and scales have payload estimates of their own, so every
// site is predicted (no note instead of a number). small-llama-blocks at tp=2 holds whole blocks
// on the training ranks: quantized at the senders and trained in fp8, the plan moves the same fp8,
// so the payloads are the same, and the senders that quantize (at 0.85 GB/s of bf16 on one core)
// spend longer before the transfers than those that hold fp8 already. At tp=4 the training ranks
// cut q_proj's blocks and it is quantized at its landing ranks: the bf16 landing copy (round 0),
// the quantize step (round 1) and the fp8 forwarded (round 2).
TEST(SimulateDeltaCli, Fp8DeltasArePredictedAtEverySite) {
  const std::string model = std::string("--model ") + REFIT_TEST_DATA_DIR +
                            "/models/small-llama-blocks.json --infer tp=2,engines=2 --quantize fp8-block128 "
                            "--strategy refit --delta 0.01 --json --quantize-at ";
  std::map<std::string, nlohmann::json> delta;
  for (const auto* site : {"sender --train tp=2", "training --train tp=2", "landing --train tp=4"}) {
    SCOPED_TRACE(site);
    const auto r = run_refit("simulate " + model + site);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.err.find("no delta refit"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("fp8 values and scales as the quantizer makes them"), std::string::npos) << r.err;
    const auto row = nlohmann::json::parse(r.out)["strategies"].at(0);
    ASSERT_TRUE(row.contains("delta")) << r.out;
    const auto& d = row["delta"];
    EXPECT_LT(d["moved_bytes"].get<double>() * 50, d["dense_bytes"].get<double>());
    delta[std::string(site).substr(0, std::string(site).find(' '))] = d;
  }
  EXPECT_EQ(delta["sender"]["moved_bytes"], delta["training"]["moved_bytes"]);
  EXPECT_GT(delta["sender"]["encode_s"].get<double>(), delta["training"]["encode_s"].get<double>());
  EXPECT_EQ(delta["landing"]["rounds"].size(), 3U);
}

TEST(SimulateDeltaCli, AFractionOutsideZeroToOneIsBadInput) {
  const auto r = run_refit("simulate " + kProblem + " --delta 1.5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--delta"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace refit
