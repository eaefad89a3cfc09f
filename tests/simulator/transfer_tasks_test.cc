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

// The test cluster, its NICs charging `overhead` per chunk and per transfer.
PlacedCluster cluster_with(Routes::SenderOverhead overhead) {
  const auto placed = refit::testing::make_test_cluster(3, 1, 1, 2);
  ClusterSpec spec = placed.cluster().spec();
  for (auto& n : spec.nics) {
    n.chunk_overhead = overhead.per_chunk;
    n.transfer_overhead = overhead.per_transfer;
  }
  return PlacedCluster::make(Cluster::make(std::move(spec)).value(), placed.ranks()).value();
}

Built build(const Plan& plan, std::vector<lowering::TransferCopyCost> costs,
            Routes::SenderOverhead overhead = {}) {
  const auto cluster = cluster_with(overhead);
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging).value();
  TaskSink sink({});
  const Routes routes(cluster, sink.model());
  const auto cuts = PieceCuts::make(lowered, nullptr, {}, 0).value();
  QuantizeTasks quantize(plan, testing::no_quantization(plan), routes, sink,
                         execution_model(ExecutionModelId::kRefitUcx));
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

TEST(TransferTasks, EachPieceChargesItsChunksOverhead) {
  // The relay plan above with NICs that cost o = 7 us per chunk (1 MiB chunks): the upstream's
  // pieces of 1 and 3 chunks carry o and 3 o; the relay's of 1, 2 and 1 chunks o, 2 o and o. The
  // latency stays where it was (first pieces, 15 us), and without a measured overhead none is
  // charged.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 4), transfer(1, 1, 2, 0, 4, 0)}, 4);
  constexpr double kO = 7e-6;
  const auto b = build(plan, std::vector<lowering::TransferCopyCost>(2), {.per_chunk = Seconds{kO}});
  const Model& m = b.model.model;
  ASSERT_EQ(m.task_count(), 5);
  const std::vector<double> chunks{1, 3, 1, 2, 1};
  for (std::int32_t i = 0; i < 5; ++i)
    EXPECT_NEAR(m.overhead(TaskId{i}).value, chunks[static_cast<std::size_t>(i)] * kO, 1e-18) << "task " << i;
  EXPECT_DOUBLE_EQ(m.latency(TaskId{0}).value, 15e-6);
  const auto unmeasured = build(plan, std::vector<lowering::TransferCopyCost>(2));
  for (std::int32_t i = 0; i < 5; ++i) EXPECT_EQ(unmeasured.model.model.overhead(TaskId{i}).value, 0);
}

TEST(TransferTasks, EachTransfersFirstPieceChargesItsTransferOverhead) {
  // The relay plan with NICs that cost o = 7 us per chunk and t = 20 us per transfer: the
  // upstream's pieces carry o + t and 3 o, the relay's o + t, 2 o and o: each transfer pays t
  // once, with its first piece, before its bytes flow.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 4), transfer(1, 1, 2, 0, 4, 0)}, 4);
  constexpr double kO = 7e-6, kT = 20e-6;
  const auto b = build(plan, std::vector<lowering::TransferCopyCost>(2),
                       {.per_chunk = Seconds{kO}, .per_transfer = Seconds{kT}});
  const Model& m = b.model.model;
  ASSERT_EQ(m.task_count(), 5);
  const std::vector<double> expected{kO + kT, 3 * kO, kO + kT, 2 * kO, kO};
  for (std::int32_t i = 0; i < 5; ++i)
    EXPECT_NEAR(m.overhead(TaskId{i}).value, expected[static_cast<std::size_t>(i)], 1e-18) << "task " << i;
}

TEST(TransferTasks, AnUnpackAfterItsTransferPaysNoChunkOverhead) {
  // The 2 MiB transfer whose last chunk is unpacked, on NICs of o per chunk: its one piece of 2
  // chunks carries 2 o; the unpack, a task of no bytes after it, none.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 2)}, 2);
  const lowering::TransferCopyCost cost{
      .packs = false, .unpacks = true, .pack_first = Bytes{0}, .unpack_last = Bytes{kMiB}};
  const auto b = build(plan, {cost}, {.per_chunk = Seconds{5e-6}});
  ASSERT_EQ(b.model.model.task_count(), 2);
  EXPECT_NEAR(b.model.model.overhead(TaskId{0}).value, 10e-6, 1e-18);
  EXPECT_EQ(b.model.model.overhead(TaskId{1}).value, 0);
}

}  // namespace
}  // namespace refit::sim
