// FP8 quantized at the landing ranks, in the simulator: the landing rank quantizes once the
// whole bf16 copy has landed, and the fp8 it sends on leaves once it has quantized.
#include <gtest/gtest.h>

#include <algorithm>

#include "landing_problem.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

TEST(LandingSimulation, TheStepWaitsForTheWholeCopyAndTheFp8WaitsForTheStep) {
  // A [256, 512] bf16 weight in rows of 200 on training ranks 0 and 1 cuts block row 1, so it
  // lands whole on engine 0 (rank 2); engine 1 (rank 3) gets fp8 from there. One GPU and one
  // 50 GB/s NIC per node, latency alpha = 15 us, copy bandwidth 1500 GB/s.
  //  - The copy: 204800 + 57344 = 262144 bytes from two NICs into rank 2's: alpha + 262144 / B.
  //  - The step quantizes 262144 bytes of bf16, read 1970 / 1122 times as fast as the GPU copies
  //    (refit's kernels on an H100, measured_kernels.cc; quantize_work.h): q.
  //  - The fp8: 256 * 512 values and 2 * 4 fp32 scales, 131104 bytes: alpha + 131104 / B.
  const auto p = testing::landing_test_problem(2, 1);
  const auto c = testing::make_test_cluster(4, 1, 2, 2);
  const auto plan = make_plan("refit", p, c).value();
  ASSERT_TRUE(validate(plan, p));
  PlanSimulationOptions o;
  o.rate_tolerance = 0;
  const auto sim = simulate_plan(plan, p, c, o).value();
  constexpr double kB = 50e9;
  constexpr double kAlpha = 15e-6;
  const double q = 262144 / (1500e9 * 1970 / 1122);
  EXPECT_NEAR(sim.predicted.value, 2 * kAlpha + (262144 + 131104) / kB + q, 1e-9);
  EXPECT_NEAR(sim.breakdown[TimeKind::kQuantize].value, q, 1e-12);
  const auto step = std::ranges::find_if(sim.critical_path, [&](const CriticalTransfer& s) {
    return s.transfer >= 0 && plan.transfers[static_cast<std::size_t>(s.transfer)].quantizes();
  });
  ASSERT_NE(step, sim.critical_path.end());
  EXPECT_EQ(step->what, "quantize");
  EXPECT_NEAR(step->start.value, kAlpha + 262144 / kB, 1e-9);
}

}  // namespace
}  // namespace refit
