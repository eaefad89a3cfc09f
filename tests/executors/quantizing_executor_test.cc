// FP8 in flight through the UCX executor: training ranks hold bf16 weights, the plan moves fp8
// values and scales, and every inference rank ends with exactly what the quantizer makes of its
// box of the weight (HostShards::verify quantizes the bf16 pattern itself and compares bytes).
#include <gtest/gtest.h>

#include "quantized_problems.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "ucx_harness.h"

namespace refit {
namespace {

TEST(QuantizingExecutor, EveryStrategyDeliversWhatTheQuantizerMakes) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  for (const auto scheme : all_quant_schemes()) {
    const auto problem = testing::quantized_test_problem(scheme);
    ASSERT_EQ(problem.tensors().size(), 5u);  // two weights with their scales, and the norm
    for (const auto strategy : strategy_names()) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      testing::expect_all_verified(
          testing::run_plan(problem, testing::plan_for(problem, cluster, strategy, Bytes{4096}), {}));
    }
  }
}

TEST(QuantizingExecutor, ABf16ElementChangedAtTheSourceShowsAtItsDestinations) {
  // Rank 0 holds rows 0..127 of w.weight; after it is filled, its first element changes sign:
  // the first block's fp8 value 0 differs at the ranks holding columns 0..255 (ranks 2 and 4).
  const auto problem = testing::quantized_test_problem(QuantScheme::kFp8Block128);
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  testing::RunSpec spec;
  spec.tweak = [](std::int32_t r, Plan&, RankBuffers& b) {
    if (r == 0) b.sources.front().bytes[1] ^= std::byte{0x80};
  };
  const auto outcomes =
      testing::run_plan(problem, testing::plan_for(problem, cluster, "refit", Bytes{4096}), spec);
  for (const std::int32_t r : {2, 4}) {
    ASSERT_TRUE(outcomes[static_cast<std::size_t>(r)].wrong_data) << "rank " << r;
    EXPECT_NE(outcomes[static_cast<std::size_t>(r)].wrong_data->message.find("tensor 'w.weight'"),
              std::string::npos);
  }
  for (const std::int32_t r : {3, 5})
    EXPECT_FALSE(outcomes[static_cast<std::size_t>(r)].wrong_data) << "rank " << r;
}

// Rank 0 holds its rows 0..127 of w.weight ([128, 512] bf16) as the right half of a [128, 1024]
// parameter: its first element at element 512, rows 1024 elements apart (as a column block of a
// wider parameter lies); its other boxes each in a parameter of its own. The quantizer reads the
// weight through that region in place, and every destination holds what the quantizer makes of
// the pattern.
TEST(QuantizingExecutor, AWeightHeldAsAStridedRegionOfAParameterIsQuantizedInPlace) {
  const auto problem = testing::quantized_test_problem(QuantScheme::kFp8Block128);
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  std::vector<std::vector<std::byte>> parameters;  // rank 0's, alive through the run
  testing::RunSpec spec;
  spec.tweak = [&](std::int32_t r, Plan&, RankBuffers& b) {
    if (r != 0) return;
    ASSERT_EQ(b.sources.front().box, (Box{{0, 0}, {128, 512}}));
    testing::hold_as_parameters(problem, b, parameters);
  };
  testing::expect_all_verified(
      testing::run_plan(problem, testing::plan_for(problem, cluster, "refit", Bytes{4096}), spec));
}

TEST(QuantizingExecutor, ASourceBufferInTheWrongDtypeIsRefusedOnEveryRankNamingTheTensor) {
  // Rank 1 hands over its fp8-sized box (half the bytes) instead of bf16.
  const auto problem = testing::quantized_test_problem(QuantScheme::kMxfp8);
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  testing::RunSpec spec;
  spec.tweak = [](std::int32_t r, Plan&, RankBuffers& b) {
    if (r == 1) b.sources.front().bytes = b.sources.front().bytes.first(b.sources.front().bytes.size() / 2);
  };
  const auto outcomes =
      testing::run_plan(problem, testing::plan_for(problem, cluster, "refit", Bytes{4096}), spec);
  const auto& o = outcomes[1];
  ASSERT_TRUE(o.error);
  EXPECT_FALSE(o.prepared);
  EXPECT_NE(o.error->message.find("rank 1: tensor 'w.weight'"), std::string::npos) << o.error->message;
  EXPECT_NE(o.error->message.find("bf16"), std::string::npos) << o.error->message;
  // The others refuse with it, before any byte moves, instead of waiting for rank 1.
  for (const auto& other : outcomes) {
    ASSERT_TRUE(other.error);
    EXPECT_FALSE(other.prepared);
  }
}

}  // namespace
}  // namespace refit
