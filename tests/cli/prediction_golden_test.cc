// refit simulate --json, pinned (tests/data/predictions/cases.json says what and why): every field
// of every case's output equals its file, but the wall times. Figures are compared to 1e-12
// relative, the sums of the breakdown being free to change their order of addition; nothing else
// may move without its file changing in the same commit, with the reason.
#include <cstdlib>
#include <fstream>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "json_difference.h"
#include "run_cli.h"

namespace refit {
namespace {

using Json = nlohmann::json;
const std::string kData = REFIT_TEST_DATA_DIR;

Json without_wall_times(Json j) {
  if (j.is_object()) {
    j.erase("plan_seconds");
    j.erase("simulate_seconds");
    for (auto& [key, value] : j.items()) value = without_wall_times(value);
  } else if (j.is_array()) {
    for (auto& value : j) value = without_wall_times(value);
  }
  return j;
}

TEST(PredictionGolden, EveryPinnedOutputIsUnchanged) {
  const auto cases = Json::parse(std::ifstream(kData + "/predictions/cases.json"));
  const bool regenerate = std::getenv("REFIT_REGENERATE_GOLDEN") != nullptr;
  for (const auto& c : cases["cases"]) {
    const auto file = kData + "/predictions/" + c["file"].get<std::string>();
    SCOPED_TRACE(file);
    auto args = c["args"].get<std::string>();
    for (auto at = args.find("{data}"); at != std::string::npos; at = args.find("{data}"))
      args.replace(at, 6, kData);
    const auto r = testing::run_refit(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto got = without_wall_times(Json::parse(r.out));
    if (regenerate) {
      std::ofstream(file) << got.dump(1) << '\n';
      continue;
    }
    EXPECT_EQ(testing::json_difference(Json::parse(std::ifstream(file)), got), "");
  }
}

}  // namespace
}  // namespace refit
