// The NCCL executor's step schedule as tasks (step_tasks.h), alone, on plans built by hand: each
// rank posts each step (s + o per send or receive it posts) after its previous step, a transfer's
// chunks of one step are one task after both its ranks' posts, and a rank's step ends with its one
// task or a task after its several. U = 1 MiB chunks; s = 10 us, o = 1 us; 15 us network latency.
#include "step_tasks.h"

#include <gtest/gtest.h>

#include "plan_tasks_fixture.h"
#include "refit/planner/execution_model.h"
#include "test_cluster.h"

namespace refit::sim {
namespace {

using testing::kMiB;
using testing::plan_of;
using testing::transfer;

constexpr NcclCosts kCosts{.per_op = Seconds{1e-6}, .per_step = Seconds{10e-6}};

// The test cluster (ranks 0, 1, 2 on nodes of their own), every GPU charging kCosts.
PlacedCluster cluster_with_costs() {
  const auto placed = refit::testing::make_test_cluster(3, 1, 1, 2);
  ClusterSpec spec = placed.cluster().spec();
  for (auto& g : spec.gpus) g.nccl_costs = kCosts;
  return PlacedCluster::make(Cluster::make(std::move(spec)).value(), placed.ranks()).value();
}

// The plan's tasks at `staging`, `chunks_per_step` chunks a rank a step.
PlanModel build(const Plan& plan, Bytes staging, std::int32_t chunks_per_step) {
  const auto cluster = cluster_with_costs();
  const auto lowered = lowering::LoweredPlan::make(plan, staging).value();
  TaskSink sink({});
  const Routes routes(cluster, sink.model());
  QuantizeTasks quantize(plan, testing::no_quantization(plan), routes, sink,
                         execution_model(ExecutionModelId::kRefitNccl));
  quantize.add_senders();
  StepTasks steps(lowered, lowering::make_step_schedule(lowered, chunks_per_step).value(),
                  std::vector<lowering::TransferCopyCost>(plan.transfers.size()), routes, quantize, sink);
  std::vector<std::int32_t> all(plan.transfers.size());
  for (std::size_t t = 0; t < all.size(); ++t) all[t] = static_cast<std::int32_t>(t);
  steps.add(all, nullptr);
  return std::move(sink).take();
}

std::vector<std::int32_t> deps(const Model& m, std::int32_t task) {
  std::vector<std::int32_t> out;
  for (const auto d : m.deps(TaskId{task})) out.push_back(d.value);
  return out;
}

TEST(StepTasks, EachStepIsBothRanksPostsThenTheChunksBetweenThem) {
  // 4 MiB from rank 0 to rank 1 in steps of 2 chunks: step 0 is tasks 0 and 1 (the two posts,
  // s + 2o = 12 us each), then task 2 (2 MiB, after both, paying the latency); step 1 the same
  // after task 2, which ended both ranks' step 0 (each had that one task).
  const auto plan = plan_of({transfer(0, 0, 1, 0, 4)}, 4);
  const auto m = build(plan, Bytes{8 * kMiB}, 2);
  ASSERT_EQ(m.model.task_count(), 6);
  for (const std::int32_t post : {0, 1, 3, 4}) {
    EXPECT_EQ(m.model.bytes(TaskId{post}).value, 0) << post;
    EXPECT_NEAR(m.model.latency(TaskId{post}).value, 12e-6, 1e-15) << post;
  }
  EXPECT_EQ(deps(m.model, 0), (std::vector<std::int32_t>{}));
  EXPECT_EQ(deps(m.model, 1), (std::vector<std::int32_t>{}));
  EXPECT_EQ(deps(m.model, 2), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(deps(m.model, 3), (std::vector<std::int32_t>{2}));
  EXPECT_EQ(deps(m.model, 4), (std::vector<std::int32_t>{2}));
  EXPECT_EQ(deps(m.model, 5), (std::vector<std::int32_t>{3, 4}));
  for (const std::int32_t chunks : {2, 5}) {
    EXPECT_EQ(m.model.bytes(TaskId{chunks}).value, 2 * kMiB) << chunks;
    EXPECT_DOUBLE_EQ(m.model.latency(TaskId{chunks}).value, 15e-6) << chunks;
  }
  EXPECT_EQ(m.transfer_of_task, (std::vector<std::int32_t>{-1, -1, 0, -1, -1, 0}));
}

TEST(StepTasks, ARankWithSeveralTasksInAStepEndsItAfterAllOfThem) {
  // Rank 0 sends 1 MiB to each of ranks 1 and 2 in one step: it posts two sends (s + 2o = 12 us),
  // each receiver one receive (s + o = 11 us); both transfers after rank 0's post and their
  // receiver's; rank 0's step ends with a task of no bytes after both (the receivers' with their
  // one task each).
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1), transfer(1, 0, 2, 1, 1)}, 2);
  const auto m = build(plan, Bytes{8 * kMiB}, 2);
  ASSERT_EQ(m.model.task_count(), 6);
  EXPECT_NEAR(m.model.latency(TaskId{0}).value, 12e-6, 1e-15);  // rank 0
  EXPECT_NEAR(m.model.latency(TaskId{1}).value, 11e-6, 1e-15);  // rank 1
  EXPECT_NEAR(m.model.latency(TaskId{2}).value, 11e-6, 1e-15);  // rank 2
  EXPECT_EQ(deps(m.model, 3), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(deps(m.model, 4), (std::vector<std::int32_t>{0, 2}));
  EXPECT_EQ(deps(m.model, 5), (std::vector<std::int32_t>{3, 4}));
  EXPECT_EQ(m.model.bytes(TaskId{5}).value, 0);
}

}  // namespace
}  // namespace refit::sim
