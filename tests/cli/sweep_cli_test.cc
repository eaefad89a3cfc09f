// refit sweep through the real binary: every point of the grid is what refit simulate --compare
// predicts for it, points in parallel report progress on stderr, and bad input names --vary.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

const std::string kModel = std::string("--model ") + REFIT_TEST_DATA_DIR +
                           "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2";

TEST(SweepCli, EachPointIsWhatSimulateCompareGivesForIt) {
  const auto r = run_refit("sweep " + kModel +
                           " --cluster dgx-h100:gpus_per_node=2 --vary nic_gbps=200,400 "
                           "--vary 'infer=tp=2,dp=2;tp=4' --jobs 2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto points = nlohmann::json::parse(r.out)["points"];
  // 2 x 2 points, the last --vary fastest.
  ASSERT_EQ(points.size(), 4u);
  EXPECT_EQ(points[1]["values"], (nlohmann::json{{"nic_gbps", "200"}, {"infer", "tp=4"}}));
  EXPECT_EQ(points[2]["values"], (nlohmann::json{{"nic_gbps", "400"}, {"infer", "tp=2,dp=2"}}));
  // The point is the preset with that override and that layout, predicted alone: the same JSON
  // numbers, since the simulator is deterministic.
  const auto alone = run_refit("simulate --model " + std::string(REFIT_TEST_DATA_DIR) +
                               "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=4 "
                               "--cluster dgx-h100:gpus_per_node=2,nic_gbps=400 --compare --json");
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  const auto expected = nlohmann::json::parse(alone.out);
  EXPECT_EQ(points[3]["lower_bound_s"], expected["lower_bound_s"]);
  ASSERT_EQ(points[3]["strategies"].size(), expected["strategies"].size());
  for (std::size_t i = 0; i < expected["strategies"].size(); ++i)
    EXPECT_EQ(points[3]["strategies"][i]["predicted_s"], expected["strategies"][i]["predicted_s"]) << i;
  // stderr is no terminal here: a progress line per point, the last one 4/4.
  EXPECT_NE(r.err.find("4/4 points"), std::string::npos) << r.err;
}

TEST(SweepCli, ANoteOfEveryPointIsSaidOnce) {
  // dgx-h200's copy rate is assumed (refit's kernels have no run on an H200): every row of both
  // points rests on it, and stderr says so once.
  const auto r = run_refit("sweep " + kModel + " --cluster dgx-h200:gpus_per_node=2 --vary nic_gbps=200,400");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string note = "refit sweep: note: pack/unpack on the H200 is charged at 1608 GB/s";
  const auto first = r.err.find(note);
  ASSERT_NE(first, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find(note, first + 1), std::string::npos) << r.err;
}

TEST(SweepCli, BadVaryIsBadInputNamingIt) {
  for (const auto& [args, names] : std::vector<std::pair<std::string, std::string>>{
           {"--vary nic_speed=1,2", "--vary nic_speed: unknown key"},
           {"--vary nic_gbps", "--vary nic_gbps: expected KEY=V1,V2"},
           {"--vary nic_gbps=abc", "nic_gbps=abc"},
           {"--vary nic_gbps=100 --jobs -1", "--jobs"},
           // Once refused only when reached, after every point before it had been predicted.
           {"--vary nic_gbps=100,200,-1 --json",
            "--vary nic_gbps: dgx-h100: nic_gbps=-1: must be >= 0.01"}}) {
    const auto r = run_refit("sweep " + kModel + " --cluster dgx-h100 " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(names), std::string::npos) << args << ": " << r.err;
    EXPECT_EQ(r.out, "") << args;
  }
}

}  // namespace
}  // namespace refit
