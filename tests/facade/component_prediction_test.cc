// PredictOptions::by_components (on by default) gives the whole simulation's predictions: every
// field of every row of `refit simulate --json` (predictions_json) but the wall times, numbers to
// 1e-12 relative (waiting_s averages over one component's ranks instead of all: the same figure,
// rounded apart) or 1e-18 s, and every row's resources (names and bytes exactly, utilisation to
// 1e-12 relative, as the predicted times), on problems whose plans fall into alike components (source
// replicas serving their own engines), bf16 and FP8 in flight (fp8-block128 asked at the landing ranks:
// quantized at the senders, whose training layout holds whole blocks), one strategy as refit's UCX and
// NCCL executors run it and all of them compared.
// Components of a plan share no resource of the flow model, so each runs as it would beside the
// others; alike ones end at the same time.
#include <algorithm>
#include <cmath>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "json_difference.h"
#include "refit/facade/cluster_source.h"
#include "refit/facade/prediction.h"
#include "refit/simulator/component_simulation.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";

nlohmann::ordered_json without_wall_times(nlohmann::ordered_json j) {
  for (auto& row : j["strategies"]) {
    row.erase("plan_seconds");
    row.erase("simulate_seconds");
  }
  return j;
}

// The first resource that differs (name, bytes, or utilisation beyond 1e-12 relative), or "".
std::string resource_difference(const std::vector<ResourceReport>& want,
                                const std::vector<ResourceReport>& got) {
  if (want.size() != got.size())
    return std::to_string(want.size()) + " resources -> " + std::to_string(got.size());
  for (std::size_t i = 0; i < want.size(); ++i) {
    const auto &a = want[i], &b = got[i];
    if (a.name != b.name || a.bytes != b.bytes ||
        std::abs(a.utilisation - b.utilisation) > 1e-12 * std::max(a.utilisation, b.utilisation))
      return a.name + " -> " + b.name;
  }
  return "";
}

struct Case {
  ProblemSource source;
  std::string cluster;
};

TEST(ComponentPrediction, EqualsTheWholeSimulationOnReplicatedProblems) {
  const std::vector<Case> cases{
      {{.model = kModels + "tiny-qwen3-moe.json", .train = "tp=2,ep=2,etp=1,dp=4", .infer = "tp=2,engines=4"},
       "dgx-h100:gpus_per_node=2"},
      {{.model = kModels + "tiny-deepseek-v3.json", .train = "pp=2,ep=2,dp=4", .infer = "tp=2,engines=4"},
       "dgx-h100:gpus_per_node=2"},
      {{.model = kModels + "small-llama-gqa-blocks.json",
        .train = "tp=4,dp=2",
        .infer = "tp=2,engines=4",
        .model_options = {.quantize = "fp8-block128", .quantize_at = "landing"}},
       "dgx-h100:gpus_per_node=4"}};
  int split = 0;
  for (const auto& c : cases) {
    SCOPED_TRACE(c.source.model + " " + c.source.train + " -> " + c.source.infer);
    const auto problem = load_problem(c.source).value();
    const auto placed = load_cluster({.preset = c.cluster}, job_of(problem)).value().placed;
    const PredictionInputs in{.source = c.source, .problem = problem, .cluster = placed};
    // The refit plan falls into several alike components, simulated once (else this shows nothing).
    const auto plan = make_plan("refit", problem, placed).value();
    const auto parts = simulate_plan_by_components(plan, problem, placed).value();
    split += parts.components > 1 && parts.simulated == 1;
    // refit as its default deployment (the UCX executor's streams) and as refit's NCCL executor
    // runs it (steps), then every strategy compared.
    for (const std::string deployment : {"", "refit-nccl", "compare"}) {
      const bool all = deployment == "compare";
      const auto whole = all ? compare(in, {.by_components = false})
                             : predict(in, {.deployment = deployment, .by_components = false});
      const auto by_parts = all ? compare(in, {}) : predict(in, {.deployment = deployment});
      ASSERT_TRUE(whole && by_parts);
      EXPECT_EQ(testing::json_difference(without_wall_times(predictions_json(*whole)),
                                         without_wall_times(predictions_json(*by_parts)), "$"),
                "");
      ASSERT_EQ(whole->rows.size(), by_parts->rows.size());
      for (std::size_t r = 0; r < whole->rows.size(); ++r)
        EXPECT_EQ(resource_difference(whole->rows[r].sim.resources, by_parts->rows[r].sim.resources), "")
            << whole->rows[r].strategy << " as " << whole->rows[r].deployment->name;
    }
  }
  EXPECT_EQ(split, 3);
}

}  // namespace
}  // namespace refit
