// refit simulate --delta: dense and delta side by side, in the table and in the JSON.
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

const std::string kProblem = std::string("--model ") + REFIT_TEST_DATA_DIR +
                             "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2 "
                             "--cluster dgx-h100:gpus_per_node=2";

// --compare --delta: the direct plan as refit's executors run it gets a delta prediction whose
// parts add up (encode + transfer + decode) and which moves under a tenth of dense at 2 %
// changed; the refit plan, which relays, gets a note instead; baselines get neither.
TEST(SimulateDeltaCli, CompareShowsDenseAndDeltaSideBySide) {
  const auto r = run_refit("simulate " + kProblem + " --compare --delta 0.02 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  int with_delta = 0;
  for (const auto& row : j["strategies"]) {
    if (!row.contains("delta")) continue;
    ++with_delta;
    EXPECT_EQ(row["deployment"], "refit");
    const auto& d = row["delta"];
    EXPECT_EQ(d["change_fraction"], 0.02);
    EXPECT_LT(d["moved_bytes"].get<double>() * 10, d["dense_bytes"].get<double>());
    EXPECT_NEAR(d["predicted_s"].get<double>(),
                d["encode_s"].get<double>() + d["transfer_s"].get<double>() + d["decode_s"].get<double>(),
                1e-12);
    EXPECT_NEAR(d["time_vs_dense"].get<double>(),
                d["predicted_s"].get<double>() / row["predicted_s"].get<double>(), 1e-9);
  }
  EXPECT_GE(with_delta, 1);
  EXPECT_NE(r.err.find("--delta: no delta refit of refit as refit runs it"), std::string::npos) << r.err;

  const auto table = run_refit("simulate " + kProblem + " --compare --delta 0.02");
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("delta refit, 2 % of the elements changed"), std::string::npos) << table.out;
}

TEST(SimulateDeltaCli, AFractionOutsideZeroToOneIsBadInput) {
  const auto r = run_refit("simulate " + kProblem + " --delta 1.5");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--delta"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace refit
