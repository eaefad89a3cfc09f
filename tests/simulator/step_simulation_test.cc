// simulate_plan under a step-paced execution model (refit-nccl): the lowering's step schedule
// (lowering/step_schedule.h) as refit's NCCL executor runs it, one group per rank and step, a
// rank's step after its previous one. Closed-form times on plans built by hand (hand_plans.h),
// with 1 MiB chunks: U = 1 MiB / NIC bandwidth, alpha = network latency.
#include <gtest/gtest.h>

#include <optional>
#include <string>

#include "hand_plans.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/topology/measured_kernels.h"
#include "test_cluster.h"

namespace refit {
namespace {

using testing::kAlpha;
using testing::kMiB;
using testing::kU;
using testing::rank_range;
using testing::replicated;

// A refit-nccl (or refit-ucx) plan of these transfers of tensor 0.
Plan plan_of(const ReshardProblem& p, std::vector<Transfer> transfers, ExecutionModelId execution) {
  Plan plan = testing::plan_of(p, std::move(transfers));
  plan.execution = execution;
  return plan;
}

// `mib` MiB of tensor 0's rows [row, row + mib) (in MiB) from `from` to `to`.
Transfer transfer(std::int32_t id, std::int32_t from, std::int32_t to, std::int64_t row, std::int64_t mib,
                  std::int32_t via = kFromSourceShard) {
  return testing::transfer(id, from, to, 0, row, mib, via);
}

// A tensor of `mib` MiB, whole on rank 0, replicated on ranks 1 .. destinations.
ReshardProblem problem(std::int64_t mib, std::int32_t destinations) {
  return ReshardProblem::make({replicated("w", mib, 0, rank_range(1, destinations))}, 1, destinations)
      .value();
}

double predicted(const Plan& plan, const ReshardProblem& p, const PlacedCluster& c, Bytes staging) {
  PlanSimulationOptions o;
  o.rate_tolerance = 0;
  o.staging = staging;
  return simulate_plan(plan, p, c, o).value().predicted.value;
}

TEST(StepSimulation, HalfTheStagingBoundsWhatAStepMoves) {
  // One pair, 8 MiB in one transfer of 8 chunks, every chunk one run on both sides (in place).
  // Staging 4 MiB: 2 MiB (two chunks) per rank and step, so four steps, each one flow of 2 MiB
  // after the previous: 4 (alpha + 2U). Staging 256 MiB: one step, alpha + 8U, which is also
  // what the UCX executor's stream takes whatever the staging.
  const auto p = problem(8, 1);
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto nccl = plan_of(p, {transfer(0, 0, 1, 0, 8)}, ExecutionModelId::kRefitNccl);
  EXPECT_NEAR(predicted(nccl, p, c, Bytes{4 * kMiB}), 4 * (kAlpha + 2 * kU), 1e-9);
  EXPECT_NEAR(predicted(nccl, p, c, Bytes{256 * kMiB}), kAlpha + 8 * kU, 1e-9);
  const auto ucx = plan_of(p, {transfer(0, 0, 1, 0, 8)}, ExecutionModelId::kRefitUcx);
  EXPECT_NEAR(predicted(ucx, p, c, Bytes{4 * kMiB}), kAlpha + 8 * kU, 1e-9);
}

TEST(StepSimulation, TheExecutorsChunksPerStepBoundAStep) {
  // n + 1 one-chunk transfers from rank 0 to rank 1, n the NCCL executor's chunks per rank and
  // step (the one constant both read), staging ample: step 0 holds n of them, n flows sharing
  // the NICs, ending at alpha + nU; step 1 the last, alpha + U later: 2 alpha + (n + 1)U.
  const std::int32_t n = execution_model(ExecutionModelId::kRefitNccl).step_chunks;
  ASSERT_GT(n, 0);
  const auto p = problem(n + 1, 1);
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  std::vector<Transfer> transfers;
  for (std::int32_t i = 0; i <= n; ++i) transfers.push_back(transfer(i, 0, 1, i, 1));
  const auto plan = plan_of(p, std::move(transfers), ExecutionModelId::kRefitNccl);
  EXPECT_NEAR(predicted(plan, p, c, Bytes{4 * (n + 1) * kMiB}), 2 * kAlpha + (n + 1) * kU, 1e-9);
}

TEST(StepSimulation, ARelayForwardsInALaterStepOfItsSender) {
  // Rank 0 sends 4 MiB to rank 1, which forwards it to rank 2; staging 4 MiB, two chunks per rank
  // and step. The schedule (first fit, chunks in plan order): transfer 0's chunks 0-1 in step 0,
  // 2-3 in step 1; the relay's chunk 0 waits for step 0 but rank 1's step 1 is full, so chunks 0-1
  // go in step 2, 2-3 in step 3. Rank 1 is in every step, one after the other: 4 (alpha + 2U).
  const auto p = problem(4, 2);
  const auto c = testing::make_test_cluster(3, 1, 1, 2);
  const auto plan =
      plan_of(p, {transfer(0, 0, 1, 0, 4), transfer(1, 1, 2, 0, 4, 0)}, ExecutionModelId::kRefitNccl);
  EXPECT_NEAR(predicted(plan, p, c, Bytes{4 * kMiB}), 4 * (kAlpha + 2 * kU), 1e-9);
}

TEST(StepSimulation, ASendersStagingHalfLimitsItsStepsWhateverTheReceivers) {
  // Rank 0 sends 2 MiB to each of ranks 1 and 2, staging 4 MiB (2 MiB per step): the sender's half
  // holds one transfer a step, so step 0 moves the first, step 1 the second, each alpha + 2U
  // alone on the NICs: 2 (alpha + 2U). With staging 8 MiB both go in step 0 and share the sender's
  // NIC: alpha + 4U.
  const auto p = problem(2, 2);
  const auto c = testing::make_test_cluster(3, 1, 1, 2);
  const auto plan =
      plan_of(p, {transfer(0, 0, 1, 0, 2), transfer(1, 0, 2, 0, 2)}, ExecutionModelId::kRefitNccl);
  EXPECT_NEAR(predicted(plan, p, c, Bytes{4 * kMiB}), 2 * (kAlpha + 2 * kU), 1e-9);
  EXPECT_NEAR(predicted(plan, p, c, Bytes{8 * kMiB}), kAlpha + 4 * kU, 1e-9);
}

// `c` with refit's NCCL executor charging `costs` on every GPU (nullopt: unmeasured).
PlacedCluster with_nccl_costs(const PlacedCluster& c, std::optional<NcclCosts> costs) {
  ClusterSpec spec = c.cluster().spec();
  for (auto& g : spec.gpus) g.nccl_costs = costs;
  return PlacedCluster::make(Cluster::make(std::move(spec)).value(), c.ranks()).value();
}

constexpr NcclCosts kCosts{.per_op = Seconds{2e-6}, .per_step = Seconds{5e-6}};

TEST(StepSimulation, EachRankPostsItsStepBeforeItsChunksMove) {
  // As in HalfTheStagingBoundsWhatAStepMoves at 4 MiB of staging: four steps of two chunks. Each
  // rank posts each step, s + 2o (two sends, or two receives), the two in parallel, before the
  // step's flow: 4 (s + 2o + alpha + 2U) with o = 2 us, s = 5 us.
  const auto p = problem(8, 1);
  const auto c = with_nccl_costs(testing::make_test_cluster(2, 1, 1, 1), kCosts);
  const auto plan = plan_of(p, {transfer(0, 0, 1, 0, 8)}, ExecutionModelId::kRefitNccl);
  EXPECT_NEAR(predicted(plan, p, c, Bytes{4 * kMiB}), 4 * (5e-6 + 2 * 2e-6 + kAlpha + 2 * kU), 1e-9);
}

TEST(StepSimulation, ARankPaysForEveryOperationItPostsInAStep) {
  // As in ASendersStagingHalfLimitsItsStepsWhateverTheReceivers at 8 MiB of staging: rank 0 posts
  // four sends in step 0 (s + 4o), ranks 1 and 2 two receives each (s + 2o); both flows wait for
  // rank 0 and then share its NIC: s + 4o + alpha + 4U.
  const auto p = problem(2, 2);
  const auto c = with_nccl_costs(testing::make_test_cluster(3, 1, 1, 2), kCosts);
  const auto plan =
      plan_of(p, {transfer(0, 0, 1, 0, 2), transfer(1, 0, 2, 0, 2)}, ExecutionModelId::kRefitNccl);
  EXPECT_NEAR(predicted(plan, p, c, Bytes{8 * kMiB}), 5e-6 + 4 * 2e-6 + kAlpha + 4 * kU, 1e-9);
}

TEST(StepSimulation, ARankPostsItsFirstStepOnceItsCallHasStarted) {
  // The four steps of EachRankPostsItsStepBeforeItsChunksMove in one call that launches for
  // L = 100 us: the first post waits for the launch, so L + 4 (s + 2o + alpha + 2U), not a first
  // post hidden behind the launch.
  const auto p = problem(8, 1);
  const auto c = with_nccl_costs(testing::make_test_cluster(2, 1, 1, 1), kCosts);
  const auto plan = plan_of(p, {transfer(0, 0, 1, 0, 8)}, ExecutionModelId::kRefitNccl);
  const CallSchedule one{.calls = {Call{.label = "the plan", .launch = Seconds{100e-6}, .transfers = {0}}},
                         .execution = &execution_model(ExecutionModelId::kRefitNccl)};
  PlanSimulationOptions o;
  o.rate_tolerance = 0;
  o.staging = Bytes{4 * kMiB};
  o.calls = &one;
  EXPECT_NEAR(simulate_plan(plan, p, c, o).value().predicted.value,
              100e-6 + 4 * (5e-6 + 2 * 2e-6 + kAlpha + 2 * kU), 1e-9);
}

TEST(StepSimulation, AGpuWithoutMeasuredCostsIsChargedTheReferenceRunsAndSaysSo) {
  // Unmeasured: the reference run's o and s (measured_kernels.h), 4 (s + 2o + alpha + 2U), and an
  // assumption that names them. The UCX executor's plan of the same transfer pays neither.
  const auto p = problem(8, 1);
  const auto c = with_nccl_costs(testing::make_test_cluster(2, 1, 1, 1), std::nullopt);
  const NcclCosts ref = reference_kernels().nccl;
  ASSERT_GT(ref.per_op.value, 0);
  ASSERT_GT(ref.per_step.value, 0);
  PlanSimulationOptions o;
  o.rate_tolerance = 0;
  o.staging = Bytes{4 * kMiB};
  const auto nccl =
      simulate_plan(plan_of(p, {transfer(0, 0, 1, 0, 8)}, ExecutionModelId::kRefitNccl), p, c, o);
  ASSERT_TRUE(nccl) << nccl.error().message;
  EXPECT_NEAR(nccl->predicted.value, 4 * (ref.per_step.value + 2 * ref.per_op.value + kAlpha + 2 * kU), 1e-9);
  ASSERT_EQ(nccl->assumptions.size(), 1u);
  EXPECT_NE(nccl->assumptions[0].find("refit's NCCL executor is charged"), std::string::npos);
  EXPECT_NE(nccl->assumptions[0].find(std::string(reference_kernels().gpu)), std::string::npos);
  const auto ucx = simulate_plan(plan_of(p, {transfer(0, 0, 1, 0, 8)}, ExecutionModelId::kRefitUcx), p, c, o);
  ASSERT_TRUE(ucx) << ucx.error().message;
  EXPECT_NEAR(ucx->predicted.value, kAlpha + 8 * kU, 1e-9);
  EXPECT_TRUE(ucx->assumptions.empty());
}

TEST(StepSimulation, RefusesAPairWindow) {
  const auto p = problem(2, 1);
  const auto c = testing::make_test_cluster(2, 1, 1, 1);
  const auto plan = plan_of(p, {transfer(0, 0, 1, 0, 2)}, ExecutionModelId::kRefitNccl);
  PlanSimulationOptions o;
  o.window = 4;
  const auto refused = simulate_plan(plan, p, c, o);
  ASSERT_FALSE(refused);
  EXPECT_NE(
      refused.error().message.find("execution model 'refit-nccl' paces chunks by its step schedule, not "
                                   "by a window of 4 chunks per pair"),
      std::string::npos)
      << refused.error().message;
}

}  // namespace
}  // namespace refit
