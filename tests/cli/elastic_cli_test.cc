// refit simulate --members / --join / --fail through the real binary: the JSON fields, the maths
// they must satisfy, and bad engine indices as bad input (exit code 2 naming the option).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

// A tiny Qwen3-MoE from Megatron TP2xEP2 (4 ranks) to 3 vLLM engines of TP2 (6 ranks) on 2-GPU
// nodes: each engine is one NVLink domain of its own.
const std::string kProblem = std::string("simulate --model ") + REFIT_TEST_DATA_DIR +
                             "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,engines=3 "
                             "--cluster dgx-h100:gpus_per_node=2 --json ";

nlohmann::json elastic(const std::string& args) {
  const auto r = run_refit(kProblem + args);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return nlohmann::json::parse(r.out);
}

TEST(ElasticCli, MembersPredictTheirRefitAndTheDelta) {
  const auto j = elastic("--members 0,2");
  EXPECT_EQ(j["elastic"]["engines"], 3);
  EXPECT_EQ(j["elastic"]["members"], nlohmann::json::array({0, 2}));
  EXPECT_GE(j["elastic"]["delta_plan_s"].get<double>(), 0.0);
  EXPECT_GT(j["strategies"][0]["predicted_s"].get<double>(), 0.0);
}

// Each engine is one domain, so every byte of the joining engine enters it once, from whoever
// sends it: from peers only the training ranks send nothing and the peers send what training
// ranks alone would send.
TEST(ElasticCli, JoinFromPeersOnlyLeavesTheTrainingRanksIdle) {
  const auto peers = elastic("--join 1 --from peers");
  EXPECT_EQ(peers["elastic"]["training_bytes"], 0);
  EXPECT_EQ(peers["elastic"]["peers"], nlohmann::json::array({0, 2}));
  const auto training = elastic("--join 1 --from training");
  EXPECT_EQ(training["elastic"]["peer_bytes"], 0);
  EXPECT_GT(training["elastic"]["training_bytes"].get<std::int64_t>(), 0);
  EXPECT_EQ(peers["elastic"]["peer_bytes"], training["elastic"]["training_bytes"]);
  EXPECT_GT(peers["elastic"]["fill_s"].get<double>(), 0.0);
}

// The training ranks' NICs cannot feed three engines at once, so destination domains forward
// pieces to each other and engine 1 relays for the others: they wait out the 5 s timeout, then
// take its part in the repair step. completion = max(full, timeout + repair); lost = completion -
// full.
TEST(ElasticCli, FailureCostsAtMostTheTimeoutAndTheRepair) {
  const auto f = elastic("--fail 1 --timeout 5")["elastic"];
  const double full = f["full_s"], repair = f["repair_s"], completion = f["completion_s"], lost = f["lost_s"];
  EXPECT_GT(f["relayed_bytes"].get<std::int64_t>(), 0);
  EXPECT_GT(repair, 0.0);
  EXPECT_DOUBLE_EQ(completion, std::max(full, 5.0 + repair));
  EXPECT_DOUBLE_EQ(lost, completion - full);
  EXPECT_EQ(f["timeout_s"], 5.0);
}

TEST(ElasticCli, TheTextShowsWhatTheJsonHas) {
  // --sensitivity and --explain were in the JSON of an elastic prediction but left out of its text,
  // without a word.
  const std::string text = std::string("simulate --model ") + REFIT_TEST_DATA_DIR +
                           "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,engines=3 "
                           "--cluster dgx-h100:gpus_per_node=2 ";
  for (const auto& [args, shown] : {std::pair{"--join 1 --sensitivity", "sensitivity:"},
                                    std::pair{"--members 0 --explain", "biggest contributors"}}) {
    const auto r = run_refit(text + args);
    EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
    EXPECT_NE(r.out.find(shown), std::string::npos) << args << ":\n" << r.out;
  }
}

TEST(ElasticCli, BadEnginesAreBadInputNamingTheOption) {
  for (const auto& [args, text] : std::vector<std::pair<std::string, std::string>>{
           {"--members 0,3", "member engine 3 is not in [0, 3)"},
           {"--members 2,1", "member engine 1 follows 2"},
           {"--join 7", "--join: engine 7 is not in [0, 3)"},
           {"--join 0 --peers 0", "--peers: engine 0 is the one that joins"},
           {"--join 0 --from nobody", "--from: 'nobody'"},
           {"--fail 9", "--fail: engine 9 is not in [0, 3)"},
           {"--members 0 --join 1", "exactly one of --members, --join and --fail"},
           {"--members 0 --compare", "drop --compare"},
           // refit's executors refuse a delta step over a membership: no prediction of one.
           {"--members 0 --delta 0.3", "--delta: refit's executors run a delta refit over every engine only"},
           {"--join 1 --delta 0.3", "a joining or restarted engine has no earlier weights to patch"}}) {
    const auto r = run_refit(kProblem + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_NE(r.err.find(text), std::string::npos) << args << ": " << r.err;
  }
}

TEST(ElasticCli, HelpNamesTheOptions) {
  const auto r = run_refit("simulate --help");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* option : {"--members", "--join", "--peers", "--from", "--fail", "--timeout"})
    EXPECT_NE(r.out.find(option), std::string::npos) << option;
}

}  // namespace
}  // namespace refit
