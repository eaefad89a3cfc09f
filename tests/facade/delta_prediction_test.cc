// A delta refit's step predicted beside the dense refit (PredictOptions::delta): what it moves
// shrinks with the change fraction, its parts add up, and plans the delta executor does not take
// get a note instead of a number.
#include <gtest/gtest.h>

#include <algorithm>

#include "refit/facade/cluster_source.h"
#include "refit/facade/prediction.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";
const ProblemSource kSource{
    .model = kModels + "tiny-qwen3-moe.json", .train = "tp=2,ep=2,etp=1", .infer = "tp=2,dp=2"};

Predictions predicted(const PredictOptions& options, bool compare_all = false) {
  const auto problem = load_problem(kSource).value();
  const auto placed = load_cluster({.preset = "dgx-h100:gpus_per_node=2"}, job_of(problem)).value().placed;
  const PredictionInputs in{.source = kSource, .problem = problem, .cluster = placed};
  return (compare_all ? compare(in, options) : predict(in, options)).value();
}

TEST(DeltaPrediction, MovesLessThanDenseAndMoreAsMoreChanges) {
  Bytes previous{0};
  std::optional<Bytes> dense;
  for (const double f : {0.001, 0.01, 0.1, 1.0}) {
    SCOPED_TRACE(f);
    const auto p = predicted({.strategy = "direct", .deployment = "refit", .delta = f});
    const auto& row = p.rows.front();
    ASSERT_TRUE(row.delta);
    const auto& d = *row.delta;
    EXPECT_GT(d.dense_bytes, Bytes{0});
    if (dense) EXPECT_EQ(d.dense_bytes, *dense);
    dense = d.dense_bytes;
    EXPECT_GT(d.moved_bytes, previous);
    previous = d.moved_bytes;
    // At 10 % changed the codec's payloads are about 5 % (bf16) and 8 % (fp32) of dense
    // (bench/RESULTS.md), headers aside.
    if (f <= 0.1) EXPECT_LT(d.moved_bytes.value * 5, d.dense_bytes.value);
    EXPECT_DOUBLE_EQ(d.predicted.value, (d.encode + d.transfer + d.decode).value);
    EXPECT_GT(d.encode.value, 0.0);
    EXPECT_GT(d.decode.value, 0.0);
  }
}

// Nothing changed: no piece sends anything, so no transfer; the scans still cost their pass.
TEST(DeltaPrediction, NothingChangedMovesNothing) {
  const auto p = predicted({.strategy = "direct", .deployment = "refit", .delta = 0.0});
  const auto& d = *p.rows.front().delta;
  EXPECT_EQ(d.moved_bytes, Bytes{0});
  EXPECT_EQ(d.transfer.value, 0.0);
  EXPECT_GT(d.encode.value, 0.0);
}

// --compare: refit's executors' rows whose plan has no relay get a delta prediction (direct as
// refit runs it, at least), the others a note that says why not; the deployed baselines neither.
TEST(DeltaPrediction, CompareGivesEveryRowOfRefitsExecutorsADeltaOrANote) {
  const auto p = predicted({.delta = 0.02}, /*compare_all=*/true);
  int with_delta = 0;
  for (const auto& r : p.rows) {
    SCOPED_TRACE(r.strategy + " as " + std::string(r.deployment->name));
    const bool noted =
        std::ranges::any_of(r.notes, [](const std::string& n) { return n.starts_with("--delta"); });
    if (r.deployment->id != DeploymentId::kRefit) {
      EXPECT_FALSE(r.delta);
      continue;
    }
    EXPECT_TRUE(noted);
    with_delta += r.delta ? 1 : 0;
  }
  EXPECT_GE(with_delta, 1);
}

TEST(DeltaPrediction, AFractionOutsideZeroToOneIsRefusedNamingTheOption) {
  const auto problem = load_problem(kSource).value();
  const auto placed = load_cluster({.preset = "dgx-h100:gpus_per_node=2"}, job_of(problem)).value().placed;
  const auto p = predict({.source = kSource, .problem = problem, .cluster = placed}, {.delta = 1.5});
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("--delta"), std::string::npos);
}

}  // namespace
}  // namespace refit
