// The NCCL executor's costs fitted from runs that differ only in chunks and steps
// (executors/nccl/src/nccl_cost_fit.h), as bench/nccl_plan_bench and `refit topo --discover
// --measure` fit them.
#include "nccl_cost_fit.h"

#include <gtest/gtest.h>

#include <vector>

namespace refit::nccl_detail {
namespace {

TEST(NcclCostFit, RecoversTheCostsOfRunsThatFollowTheLine) {
  // The five cuts --measure times, (chunks, steps) = (16, 1), (64, 1), (256, 1), (256, 64),
  // (256, 256), each taking t = 3 ms + chunks x 4.47 us + steps x 5.02 us: the fit gives back
  // 3 ms, 4.47 us and 5.02 us.
  std::vector<NcclRun> runs;
  for (const auto& [chunks, steps] :
       std::vector<std::pair<std::int64_t, std::int64_t>>{{16, 1}, {64, 1}, {256, 1}, {256, 64}, {256, 256}})
    runs.push_back({.chunks = chunks,
                    .steps = steps,
                    .time = Seconds{3e-3 + static_cast<double>(chunks) * 4.47e-6 +
                                    static_cast<double>(steps) * 5.02e-6}});
  const auto fit = fit_nccl_runs(runs);
  ASSERT_TRUE(fit.has_value());
  EXPECT_NEAR(fit->fixed.value, 3e-3, 1e-12);
  EXPECT_NEAR(fit->per_chunk.value, 4.47e-6, 1e-12);
  EXPECT_NEAR(fit->per_step.value, 5.02e-6, 1e-12);
}

TEST(NcclCostFit, RunsOfOneStepEachDoNotTellStepsFromTheFixedCost) {
  // steps = 1 in every run: the steps column equals the constant one, so no fit.
  const std::vector<NcclRun> runs{{.chunks = 16, .steps = 1, .time = Seconds{1e-3}},
                                  {.chunks = 64, .steps = 1, .time = Seconds{2e-3}},
                                  {.chunks = 256, .steps = 1, .time = Seconds{5e-3}}};
  EXPECT_FALSE(fit_nccl_runs(runs).has_value());
}

}  // namespace
}  // namespace refit::nccl_detail
