// The sim executor predicts instead of moving: its report must be the simulator's prediction of
// the same plan, with each rank's bytes as the plan assigns them, and it refuses what the real
// executors refuse at prepare (a plan that does not solve the problem, a rank outside it).
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/executors/sim_executor.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

// [4096, 4096] fp32 rows over 2 ranks on node 0 to 4 replicas over nodes 1 and 2.
ReshardProblem problem() {
  const Shape shape{4096, 4096};
  return ReshardProblem::make(
             {testing::make_reshard("w", shape, make_layout(shape, {2}, rank_range(0, 2), "S0"),
                                    make_layout(shape, {4}, rank_range(2, 4), "R"), DType::kFP32)},
             2, 4)
      .value();
}

TEST(SimExecutor, ReportsTheSimulatorsPredictionAndTheRanksBytes) {
  const auto p = problem();
  const auto c = testing::make_test_cluster(3, 2, 2, 4);
  const auto plan = make_plan("refit", p, c).value();
  SimExecutor executor(p, c);
  const auto expected = simulate_plan(plan, p, c).value();
  for (std::int32_t r = 0; r < plan.world_size(); ++r) {
    auto prepared = executor.prepare(plan, Rank{r}, RankBuffers{});
    ASSERT_TRUE(prepared) << prepared.error().message;
    const auto report = executor.execute(**prepared);
    ASSERT_TRUE(report) << report.error().message;
    EXPECT_EQ(report->elapsed.value, expected.predicted.value);
    Bytes sent{0}, received{0};
    for (const auto& t : plan.transfers) {
      if (t.sender.value == r) sent += t.bytes;
      if (t.receiver.value == r) received += t.bytes;
    }
    EXPECT_EQ(report->bytes_sent, sent) << "rank " << r;
    EXPECT_EQ(report->bytes_received, received) << "rank " << r;
  }
  ASSERT_TRUE(executor.last_simulation());
  EXPECT_FALSE(executor.last_simulation()->critical_path.empty());
  // Every destination byte lands once per replica: 4 x 64 MiB received in all.
  Bytes landed{0};
  for (std::int32_t r = 2; r < 6; ++r)
    for (const auto& t : plan.transfers)
      if (t.receiver.value == r) landed += t.bytes;
  EXPECT_EQ(landed.value, 4 * std::int64_t{4096} * 4096 * 4);
}

TEST(SimExecutor, RefusesAPlanThatDoesNotSolveTheProblemAndForeignRanks) {
  const auto p = problem();
  const auto c = testing::make_test_cluster(3, 2, 2, 4);
  auto plan = make_plan("direct", p, c).value();
  SimExecutor executor(p, c);
  const auto outside = executor.prepare(plan, Rank{6}, RankBuffers{});
  ASSERT_FALSE(outside);
  EXPECT_EQ(outside.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(outside.error().message.find("rank 6 is not one of the plan's 6 ranks"), std::string::npos)
      << outside.error().message;
  plan.transfers.pop_back();  // a destination box is now never delivered
  const auto broken = executor.prepare(plan, Rank{0}, RankBuffers{});
  ASSERT_FALSE(broken);
  EXPECT_EQ(broken.error().code, ErrorCode::kMismatch);
  EXPECT_NE(broken.error().message.find("the sim executor's plan"), std::string::npos)
      << broken.error().message;
}

}  // namespace
}  // namespace refit
