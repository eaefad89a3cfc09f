// A prediction's options are checked before anything is planned, each refusal naming the option
// as the command line spells it (the Python binding shares the use case and its words).
#include <gtest/gtest.h>

#include <limits>

#include "refit/facade/cluster_source.h"
#include "refit/facade/elastic_prediction.h"
#include "refit/facade/prediction.h"

namespace refit {
namespace {

// tiny-llama TP2 -> TP2 on a DGX H100: what the inputs refer to lives as long as the object.
struct TinyLlama {
  ProblemSource source{.model = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-llama.json",
                       .train = "tp=2",
                       .infer = "tp=2"};
  ReshardProblem problem = load_problem(source).value();
  PlacedCluster cluster = load_cluster({.preset = "dgx-h100"}, job_of(problem)).value().placed;
  PredictionInputs inputs() const { return {.source = source, .problem = problem, .cluster = cluster}; }
};

void expect_refused(const PredictOptions& o, const std::string& message) {
  const TinyLlama tiny;
  for (const bool comparing : {false, true}) {
    const auto out = comparing ? compare(tiny.inputs(), o) : predict(tiny.inputs(), o);
    ASSERT_FALSE(out) << message;
    EXPECT_EQ(out.error().code, ErrorCode::kOutOfRange);
    EXPECT_EQ(out.error().message, message);
  }
}

// 32 bytes is the least staging: one 16-byte chunk in each half (the executors' chunk rule).
TEST(PredictOptions, AStagingBelowOneChunkIsRefusedNamingIt) {
  expect_refused({.staging = Bytes{31}}, "--staging: 31 bytes is below the 32 bytes one chunk needs");
  const TinyLlama tiny;
  EXPECT_TRUE(predict(tiny.inputs(), {.staging = Bytes{32}}));
}

TEST(PredictOptions, AChangeFractionOutsideZeroToOneIsRefusedNamingIt) {
  expect_refused({.delta = 1.5}, "--delta: change fraction 1.5 is not in [0, 1]");
}

// The executors wait at most kMaxTimeout (1e6 s) on a peer: a failure predicted with a longer
// wait, or an infinite one (once reported as a null completion time), is nothing they do.
TEST(PredictOptions, AnElasticTimeoutOutsideTheExecutorsRangeIsRefusedNamingIt) {
  const TinyLlama tiny;
  for (const double timeout : {0.0, 2e6, std::numeric_limits<double>::infinity()}) {
    const auto out = predict_elastic(tiny.inputs(), {}, {.fail = 0, .timeout = Seconds{timeout}});
    ASSERT_FALSE(out) << timeout;
    EXPECT_EQ(out.error().code, ErrorCode::kOutOfRange);
    EXPECT_NE(out.error().message.find("--timeout: "), std::string::npos) << out.error().message;
    EXPECT_NE(out.error().message.find(" s is not in (0, 1000000] s"), std::string::npos)
        << out.error().message;
  }
}

}  // namespace
}  // namespace refit
