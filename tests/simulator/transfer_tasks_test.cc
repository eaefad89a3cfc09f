// Transfers as tasks one by one (transfer_tasks.h), on plans built by hand: the pieces PieceCuts
// cuts, what each waits for, and the copies a transfer's first and last chunks add. U = 1 MiB.
#include "transfer_tasks.h"

#include <gtest/gtest.h>

#include "plan_tasks_fixture.h"
#include "test_cluster.h"

namespace refit::sim {
namespace {

using testing::kMiB;
using testing::plan_of;
using testing::transfer;

struct Built {
  PlanModel model;
  std::vector<TaskId> ends;
};

Built build(const Plan& plan, std::vector<lowering::TransferCopyCost> costs) {
  const auto cluster = refit::testing::make_test_cluster(3, 1, 1, 2);
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging).value();
  TaskSink sink({});
  const Routes routes(cluster, sink.model());
  const auto cuts = PieceCuts::make(lowered, nullptr, {}, 0).value();
  QuantizeTasks quantize(plan, testing::no_quantization(plan), routes, sink);
  quantize.add_senders();
  TransferTasks transfers(lowered, std::move(costs), routes, cuts, quantize, sink);
  transfers.add(cuts.order(), nullptr);
  std::vector<TaskId> ends(transfers.ends().begin(), transfers.ends().end());
  return {std::move(sink).take(), std::move(ends)};
}

std::vector<std::int32_t> deps(const Model& m, std::int32_t task) {
  std::vector<std::int32_t> out;
  for (const auto d : m.deps(TaskId{task})) out.push_back(d.value);
  return out;
}

TEST(TransferTasks, APipelinedRelayStartsAfterTheUpstreamsHeadAndEndsAfterItsEnd) {
  // Rank 0 sends 4 MiB to rank 1, which forwards them to rank 2 (cut 1 + 3 and 1 + 2 + 1 MiB,
  // PieceCuts). Tasks: 0, 1 the upstream's pieces (the second after the first); 2, 3, 4 the
  // relay's: its first after the upstream's head (task 0), each after the one before, its last
  // also after the upstream's end (task 1). Only first pieces pay the 15 us latency.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 4), transfer(1, 1, 2, 0, 4, 0)}, 4);
  const auto b = build(plan, std::vector<lowering::TransferCopyCost>(2));
  const Model& m = b.model.model;
  ASSERT_EQ(m.task_count(), 5);
  EXPECT_EQ(b.model.transfer_of_task, (std::vector<std::int32_t>{0, 0, 1, 1, 1}));
  const std::vector<std::int64_t> mib{1, 3, 1, 2, 1};
  for (std::int32_t i = 0; i < 5; ++i)
    EXPECT_EQ(m.bytes(TaskId{i}).value, mib[static_cast<std::size_t>(i)] * kMiB);
  EXPECT_EQ(deps(m, 0), (std::vector<std::int32_t>{}));
  EXPECT_EQ(deps(m, 1), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(deps(m, 2), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(deps(m, 3), (std::vector<std::int32_t>{2}));
  EXPECT_EQ(deps(m, 4), (std::vector<std::int32_t>{3, 1}));
  EXPECT_DOUBLE_EQ(m.latency(TaskId{0}).value, 15e-6);
  EXPECT_DOUBLE_EQ(m.latency(TaskId{1}).value, 0);
  EXPECT_EQ(b.ends, (std::vector<TaskId>{TaskId{1}, TaskId{4}}));
}

TEST(TransferTasks, TheFirstChunksPackIsLatencyAndTheLastChunksUnpackATaskAfter) {
  // One transfer of 2 MiB whose first chunk is packed (1 MiB at 1500 GB/s: P) and whose last
  // is unpacked (P): its one piece pays 15 us + P, P of it a copy; the unpack is a task of no
  // bytes taking P after it, and is the transfer's end.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 2)}, 2);
  const lowering::TransferCopyCost cost{
      .packs = true, .unpacks = true, .pack_first = Bytes{kMiB}, .unpack_last = Bytes{kMiB}};
  const auto b = build(plan, {cost});
  const Model& m = b.model.model;
  const double p = static_cast<double>(kMiB) / 1500e9;
  ASSERT_EQ(m.task_count(), 2);
  EXPECT_NEAR(m.latency(TaskId{0}).value, 15e-6 + p, 1e-15);
  EXPECT_NEAR(b.model.copy_latency[0].value, p, 1e-15);
  EXPECT_EQ(m.bytes(TaskId{1}).value, 0);
  EXPECT_NEAR(m.latency(TaskId{1}).value, p, 1e-15);
  EXPECT_EQ(deps(m, 1), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(b.ends, (std::vector<TaskId>{TaskId{1}}));
}

}  // namespace
}  // namespace refit::sim
