// FP8 in flight as tasks (quantize_tasks.h), from a QuantizeWork given by hand: a sender's
// quantization before its transfers of what it makes, a receiver's after the transfers landing
// what it quantizes, each quantize_time() of its bytes on its GPU, moving nothing. (A landing
// rank's quantize step is checked on a whole plan in landing_simulation_test.cc.)
#include "quantize_tasks.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "plan_tasks_fixture.h"
#include "refit/core/quantization.h"
#include "refit/core/quantized_problem.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::sim {
namespace {

using testing::plan_of;
using testing::transfer;

// One 8 MiB bf16 weight from rank 0 to rank 1, quantized at the sender into `scheme`.
ReshardProblem one_weight_in(QuantScheme scheme) {
  const auto layout = [](std::int32_t rank) {
    return refit::testing::make_layout({4096, 1024}, {1}, refit::testing::rank_range(rank, 1), "R");
  };
  const auto bf16 =
      ReshardProblem::make({refit::testing::make_reshard("w", {4096, 1024}, layout(0), layout(1))}, 1, 1)
          .value();
  return quantize_problem(bf16, {.scheme = scheme, .site = QuantSite::kSender},
                          [](const TensorSpec&) { return true; })
      .value();
}

TEST(QuantizeTime, AMeasuredRateIsTakenPerFormatAndOnlyAnUnmeasuredOneIsAssumed) {
  // Unmeasured: the copy bandwidth times the bf16 bytes refit's quantize kernels read per byte its
  // copy kernel copied on an H100 (measured_kernels.cc: copy 1122 GB/s, fp8-block128 1970, mxfp8
  // 1577): 1 MB at a copy bandwidth of 1500 GB/s is 1e6 / (1500e9 * 1970 / 1122) = 0.380 us in
  // fp8-block128 and 1e6 / (1500e9 * 1577 / 1122) = 0.474 us in mxfp8. Measured (refit
  // calibrate) for fp8-block128 only, at 2 GB/s: 1 MB in 500 us; mxfp8 stays assumed, so a
  // problem in mxfp8 says so and one in fp8-block128 does not.
  auto spec = refit::testing::make_test_cluster(2, 1, 1, 1).cluster().spec();
  const double assumed = 1e6 / (1500e9 * 1577 / 1122);
  EXPECT_NEAR(quantize_time(Bytes{1'000'000}, QuantScheme::kFp8Block128, spec.gpus[0]).value,
              1e6 / (1500e9 * 1970 / 1122), 1e-15);
  EXPECT_NEAR(quantize_time(Bytes{1'000'000}, QuantScheme::kMxfp8, spec.gpus[0]).value, assumed, 1e-15);
  const auto block = one_weight_in(QuantScheme::kFp8Block128), mx = one_weight_in(QuantScheme::kMxfp8);
  EXPECT_TRUE(quantize_rate_assumed(Cluster::make(spec).value(), block));
  for (auto& g : spec.gpus)
    of_scheme(g.quantize_bandwidth, QuantScheme::kFp8Block128) = BytesPerSecond::from_gbps(2);
  EXPECT_DOUBLE_EQ(quantize_time(Bytes{1'000'000}, QuantScheme::kFp8Block128, spec.gpus[0]).value, 500e-6);
  EXPECT_NEAR(quantize_time(Bytes{1'000'000}, QuantScheme::kMxfp8, spec.gpus[0]).value, assumed, 1e-15);
  EXPECT_FALSE(quantize_rate_assumed(Cluster::make(spec).value(), block));
  EXPECT_TRUE(quantize_rate_assumed(Cluster::make(spec).value(), mx));
  // The prediction's note gives the ratios it assumed, 1970 / 1122 = 1.76 and 1577 / 1122 = 1.41.
  EXPECT_NE(quantize_rate_assumption().find("1.76 (fp8-block128) and 1.41 (mxfp8) bf16 bytes per byte"),
            std::string::npos)
      << quantize_rate_assumption();
}

TEST(QuantizeTasks, ASenderQuantizesBeforeAndAReceiverAfterItsTransfers) {
  // Rank 0 sends to ranks 1 and 2. Rank 0 quantizes 1 MB before transfer 0 (not transfer 1);
  // rank 1 quantizes 2 MB once transfer 0 (ending in task 7, say) has landed.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1), transfer(1, 0, 2, 0, 1)}, 1);
  const auto cluster = refit::testing::make_test_cluster(3, 1, 1, 2);
  auto work = testing::no_quantization(plan);
  work.sender_boxes[0] = {{.source = Bytes{1'000'000}, .scheme = QuantScheme::kFp8Block128}};
  work.sender_order.weights[0] = {0};
  work.sender_order.waits[0] = {{.chunk = 0, .boxes = 1}};
  of_scheme(work.receiver_bytes[1], QuantScheme::kFp8Block128) = Bytes{2'000'000};
  work.before_receiver[0] = true;
  TaskSink sink({});
  const Routes routes(cluster, sink.model());
  QuantizeTasks quantize(plan, work, routes, sink, execution_model(ExecutionModelId::kRefitUcx));
  quantize.add_senders();
  const Model& m = sink.model();
  ASSERT_EQ(m.task_count(), 1);
  EXPECT_EQ(quantize.before(plan.transfers[0], 0), TaskId{0});
  EXPECT_EQ(quantize.before(plan.transfers[1], 0), std::nullopt);
  const std::vector<std::int32_t> order{0, 1};
  const std::vector<TaskId> ends{TaskId{7}, TaskId{8}};
  quantize.add_receivers(order, ends);
  ASSERT_EQ(m.task_count(), 2);
  const auto& gpu = cluster.cluster().gpu(GpuId{0});
  EXPECT_DOUBLE_EQ(m.latency(TaskId{0}).value,
                   quantize_time(Bytes{1'000'000}, QuantScheme::kFp8Block128, gpu).value);
  EXPECT_DOUBLE_EQ(m.latency(TaskId{1}).value,
                   quantize_time(Bytes{2'000'000}, QuantScheme::kFp8Block128, gpu).value);
  EXPECT_EQ(m.bytes(TaskId{1}).value, 0);
  ASSERT_EQ(m.deps(TaskId{1}).size(), 1U);
  EXPECT_EQ(m.deps(TaskId{1})[0], TaskId{7});
  EXPECT_EQ(m.category(TaskId{1}), static_cast<std::uint32_t>(TaskKind::kQuantize));
  EXPECT_EQ(m.label(TaskId{1}), "quantize on rank 1");
}

// Rank 0 quantizes boxes of 1 and 3 MB, in that order. Transfer 0 reads the first box only (1
// box from chunk 0); transfer 1 reads the second from its chunk 1 on (2 boxes).
QuantizeWork two_boxes(const Plan& plan) {
  auto work = testing::no_quantization(plan);
  work.sender_boxes[0] = {{.source = Bytes{1'000'000}, .scheme = QuantScheme::kFp8Block128},
                          {.source = Bytes{3'000'000}, .scheme = QuantScheme::kFp8Block128}};
  work.sender_order.weights[0] = {0, 1};
  work.sender_order.waits = {{{.chunk = 0, .boxes = 1}}, {{.chunk = 1, .boxes = 2}}};
  return work;
}

TEST(QuantizeTasks, ASenderQuantizesBoxByBoxAndAChunkWaitsOnlyForTheBoxesItReads) {
  // Rank 0 quantizes boxes of 1 and 3 MB, in that order, each after the one before on its GPU.
  // Transfer 0 reads the first box only (1 box from chunk 0): it waits for task 0. Transfer 1
  // (2 chunks of 1 MiB) reads the second from its chunk 1 on (2 boxes): its chunk 0 waits for nothing, chunk
  // 1 for task 1, which follows task 0.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1), transfer(1, 0, 2, 0, 2)}, 2);
  const auto cluster = refit::testing::make_test_cluster(3, 1, 1, 2);
  const auto work = two_boxes(plan);
  TaskSink sink({});
  const Routes routes(cluster, sink.model());
  QuantizeTasks quantize(plan, work, routes, sink, execution_model(ExecutionModelId::kRefitUcx));
  quantize.add_senders();
  const Model& m = sink.model();
  ASSERT_EQ(m.task_count(), 2);
  EXPECT_EQ(quantize.before(plan.transfers[0], 0), TaskId{0});
  EXPECT_EQ(quantize.before(plan.transfers[1], 0), std::nullopt);
  EXPECT_EQ(quantize.before(plan.transfers[1], 1), TaskId{1});
  EXPECT_TRUE(m.deps(TaskId{0}).empty());
  ASSERT_EQ(m.deps(TaskId{1}).size(), 1U);
  EXPECT_EQ(m.deps(TaskId{1})[0], TaskId{0});
  const auto& gpu = cluster.cluster().gpu(GpuId{0});
  EXPECT_DOUBLE_EQ(m.latency(TaskId{0}).value,
                   quantize_time(Bytes{1'000'000}, QuantScheme::kFp8Block128, gpu).value);
  EXPECT_DOUBLE_EQ(m.latency(TaskId{1}).value,
                   quantize_time(Bytes{3'000'000}, QuantScheme::kFp8Block128, gpu).value);
}

TEST(QuantizeTasks, OnOneHostASendersBoxWaitsForItsPutsBeforeTheChunkThatReadsIt) {
  // The boxes and waits of the test above, on one host: a put is the sending thread's own copy
  // there, and refit's UCX executor quantizes on that thread, so no box is made up front.
  // - Chunk 0 of transfer 0 asks for box 0 in its pair stream 0: task 0, after nothing, in
  //   stream 0, which puts it before the chunk (so no dependency is returned).
  // - The sender then puts: task 1 in stream 0, task 2 in stream 2, task 3 in stream 0 again
  //   (which ends after task 1, so it stands for both).
  // - Chunk 1 of transfer 1 asks for box 1 in stream 1: task 4, after box 0 and the puts since,
  //   one per stream: 3 and 2. Asked again without a stream, box 1 is a dependency.
  // refit's NCCL executor quantizes beside its sends: both boxes up front, as before.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1), transfer(1, 0, 2, 0, 2)}, 2);
  const auto host = refit::testing::make_test_host(3, 1, 2);
  const auto work = two_boxes(plan);
  TaskSink sink({});
  const Routes routes(host, sink.model());
  QuantizeTasks quantize(plan, work, routes, sink, execution_model(ExecutionModelId::kRefitUcx));
  quantize.add_senders();
  Model& m = sink.model();
  EXPECT_EQ(m.task_count(), 0);
  for (int s = 0; s < 3; ++s) m.add_stream();
  EXPECT_EQ(quantize.before(plan.transfers[0], 0, 0), std::nullopt);
  ASSERT_EQ(m.task_count(), 1);
  EXPECT_EQ(m.stream(TaskId{0}), 0);
  EXPECT_TRUE(m.deps(TaskId{0}).empty());
  for (const std::int32_t stream : {0, 2, 0}) quantize.put(plan.transfers[0], m.add_task({.stream = stream}));
  EXPECT_EQ(quantize.before(plan.transfers[1], 0, 1), std::nullopt);
  EXPECT_EQ(quantize.before(plan.transfers[1], 1, 1), std::nullopt);
  ASSERT_EQ(m.task_count(), 5);
  EXPECT_EQ(m.stream(TaskId{4}), 1);
  const std::vector<TaskId> after{TaskId{0}, TaskId{3}, TaskId{2}};
  EXPECT_TRUE(std::ranges::equal(m.deps(TaskId{4}), after));
  EXPECT_EQ(quantize.before(plan.transfers[1], 1), TaskId{4});
  quantize.add_remaining_senders();
  EXPECT_EQ(m.task_count(), 5);
  EXPECT_DOUBLE_EQ(
      m.latency(TaskId{4}).value,
      quantize_time(Bytes{3'000'000}, QuantScheme::kFp8Block128, host.cluster().gpu(GpuId{0})).value);

  TaskSink beside({});
  const Routes nccl_routes(host, beside.model());
  QuantizeTasks kernels(plan, work, nccl_routes, beside, execution_model(ExecutionModelId::kRefitNccl));
  kernels.add_senders();
  EXPECT_EQ(beside.model().task_count(), 2);
}

}  // namespace
}  // namespace refit::sim
