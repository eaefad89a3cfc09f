// A CallSchedule's calls as tasks (call_tasks.h), with the transfers moved by a recording
// stand-in (one task per transfer after its gate): a call's start pays its launch after its
// queue's previous call and its `after` calls, its copies before gate its transfers, its copies
// after wait for what their rank receives and its quantizations, which wait for what it
// receives, and its end pays its finish after all of them.
#include "call_tasks.h"

#include <numeric>
#include <tuple>

#include <gtest/gtest.h>

#include "plan_tasks_fixture.h"
#include "quantize_work.h"
#include "test_cluster.h"

namespace refit::sim {
namespace {

using testing::plan_of;
using testing::transfer;

// One task per transfer, after the call's start and its sender's copy.
class OneTaskEach final : public TransferMover {
 public:
  OneTaskEach(const Plan& plan, TaskSink& sink) : plan_(plan), sink_(sink), ends_(plan.transfers.size()) {}
  void add(std::span<const std::int32_t> transfers, const CallGate* gate) override {
    for (const std::int32_t t : transfers) {
      auto& spec = sink_.spec();
      spec.deps.assign(1, gate->start);
      if (const auto copy = gate->copy_of_rank[static_cast<std::size_t>(
              plan_.transfers[static_cast<std::size_t>(t)].sender.value)];
          copy >= 0)
        spec.deps.push_back(TaskId{copy});
      spec.bytes = Bytes{1};
      spec.resources.clear();
      ends_[static_cast<std::size_t>(t)] = sink_.add(t, Seconds{0});
    }
  }
  std::span<const TaskId> ends() const override { return ends_; }

 private:
  const Plan& plan_;
  TaskSink& sink_;
  std::vector<TaskId> ends_;
};

std::vector<std::int32_t> deps(const Model& m, std::int32_t task) {
  std::vector<std::int32_t> out;
  for (const auto d : m.deps(TaskId{task})) out.push_back(d.value);
  return out;
}

// Every call of `calls` as tasks, the transfers in plan order, `call_of` each transfer's call.
PlanModel tasks_of(const Plan& plan, const CallSchedule& calls, const std::vector<std::int32_t>& call_of,
                   const PlacedCluster& cluster) {
  std::vector<std::int32_t> order(plan.transfers.size());
  for (std::size_t t = 0; t < order.size(); ++t) order[t] = static_cast<std::int32_t>(t);
  TaskSink sink(call_of);
  const Routes routes(cluster, sink.model());
  OneTaskEach mover(plan, sink);
  CallTasks tasks(plan, calls, order, call_of, cluster, routes, mover, sink);
  for (std::size_t c = 0; c < calls.calls.size(); ++c) tasks.add(static_cast<std::int32_t>(c));
  return std::move(sink).take();
}

TEST(CallTasks, ACallsCostsCopiesAndTransfersInOrder) {
  // Call 0 (queue 0): launch 1 ms, rank 0 copies 1 MB before, moves transfer 0 (0 -> 1), rank 1
  // copies 1 MB after, finish 2 ms. Tasks: 0 start; 1 rank 0's copy after 0; 2 transfer 0 after
  // 0 and 1; 3 rank 1's copy after 2 (what it received) and 0; 4 end after 2, 3 and 0.
  // Call 1 (queue 1, after call 0) moves transfer 1: 5 start after 4; 6 transfer 1; 7 end.
  // Call 2 (queue 0) moves nothing: 8 start after call 0's end (its queue's last), 9 end.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1), transfer(1, 0, 2, 0, 1)}, 1);
  const auto cluster = refit::testing::make_test_cluster(3, 1, 1, 2);
  const CallSchedule calls{.calls = {Call{.label = "a",
                                          .queue = 0,
                                          .launch = Seconds{1e-3},
                                          .finish = Seconds{2e-3},
                                          .copies_before = {RankCopy{Rank{0}, Bytes{1'000'000}}},
                                          .copies_after = {RankCopy{Rank{1}, Bytes{1'000'000}}},
                                          .transfers = {0}},
                                     Call{.label = "b", .queue = 1, .after = {0}, .transfers = {1}},
                                     Call{.label = "c", .queue = 0}}};
  const auto out = tasks_of(plan, calls, {0, 1}, cluster);
  const Model& m = out.model;
  ASSERT_EQ(m.task_count(), 10);
  EXPECT_DOUBLE_EQ(m.latency(TaskId{0}).value, 1e-3);
  EXPECT_EQ(deps(m, 1), (std::vector<std::int32_t>{0}));
  EXPECT_EQ(m.bytes(TaskId{1}).value, 1'000'000);
  EXPECT_EQ(m.resource_name(m.resources(TaskId{1})[0]), "gpu 0 copy");
  EXPECT_EQ(deps(m, 2), (std::vector<std::int32_t>{0, 1}));
  EXPECT_EQ(deps(m, 3), (std::vector<std::int32_t>{2, 0}));
  EXPECT_EQ(m.resource_name(m.resources(TaskId{3})[0]), "gpu 1 copy");
  EXPECT_EQ(deps(m, 4), (std::vector<std::int32_t>{2, 3, 0}));
  EXPECT_DOUBLE_EQ(m.latency(TaskId{4}).value, 2e-3);
  EXPECT_EQ(deps(m, 5), (std::vector<std::int32_t>{4}));
  EXPECT_EQ(deps(m, 6), (std::vector<std::int32_t>{5}));
  EXPECT_EQ(deps(m, 7), (std::vector<std::int32_t>{6, 5}));
  EXPECT_EQ(deps(m, 8), (std::vector<std::int32_t>{4}));
  EXPECT_EQ(deps(m, 9), (std::vector<std::int32_t>{8}));
  EXPECT_EQ(out.call_of_task, (std::vector<std::int32_t>{0, 0, 0, 0, 0, 1, 1, 1, 2, 2}));
  EXPECT_EQ(out.transfer_of_task, (std::vector<std::int32_t>{-1, -1, 0, -1, -1, -1, 1, -1, -1, -1}));
}

TEST(CallTasks, ARankQuantizesWhatItReceivedThenCopies) {
  // One call moves transfers 0 (0 -> 1) and 1 (0 -> 2); rank 1 quantizes 2 MB, then copies 1 MB;
  // rank 2 quantizes 3 MB and copies nothing. Tasks: 0 start; 1 transfer 0; 2 transfer 1; 3
  // rank 1's quantization after 1 and 0; 4 rank 2's after 2 and 0; 5 rank 1's copy after 3;
  // 6 end after all. A quantization holds no resource and lasts quantize_time() on its GPU.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1), transfer(1, 0, 2, 0, 1)}, 1);
  const auto cluster = refit::testing::make_test_cluster(3, 1, 1, 2);
  const CallSchedule calls{
      .calls = {Call{.label = "a",
                     .copies_after = {RankCopy{Rank{1}, Bytes{1'000'000}}},
                     .quantizes = {RankCast{Rank{1}, Bytes{2'000'000}, QuantScheme::kFp8Block128},
                                   RankCast{Rank{2}, Bytes{3'000'000}, QuantScheme::kMxfp8}},
                     .transfers = {0, 1}}}};
  const auto out = tasks_of(plan, calls, {0, 0}, cluster);
  const Model& m = out.model;
  ASSERT_EQ(m.task_count(), 7);
  EXPECT_EQ(deps(m, 3), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(deps(m, 4), (std::vector<std::int32_t>{2, 0}));
  EXPECT_EQ(deps(m, 5), (std::vector<std::int32_t>{3}));
  EXPECT_EQ(m.resource_name(m.resources(TaskId{5})[0]), "gpu 1 copy");
  EXPECT_EQ(deps(m, 6), (std::vector<std::int32_t>{1, 2, 3, 4, 5, 0}));
  const auto& gpus = cluster.cluster();
  for (const auto [task, rank, bytes, scheme] : {std::tuple{3, 1, 2'000'000, QuantScheme::kFp8Block128},
                                                 std::tuple{4, 2, 3'000'000, QuantScheme::kMxfp8}}) {
    EXPECT_TRUE(m.resources(TaskId{task}).empty());
    EXPECT_EQ(m.category(TaskId{task}), static_cast<std::uint32_t>(TaskKind::kQuantize));
    EXPECT_DOUBLE_EQ(m.latency(TaskId{task}).value,
                     quantize_time(Bytes{bytes}, scheme, gpus.gpu(cluster.gpu_of(Rank{rank}))).value);
  }
}

TEST(CallTasks, ARanksCastsIntoTwoFormatsRunOneAfterTheOther) {
  // Rank 1 casts 2 MB into fp8-block128 and 1 MB into mxfp8 once transfer 0 has landed: task 0
  // the start, 1 the transfer, 2 the first cast after 1 and 0, 3 the second after those and 2
  // (one quantizer per rank, as its quantize tasks elsewhere), 4 the end.
  const auto plan = plan_of({transfer(0, 0, 1, 0, 1)}, 1);
  const auto cluster = refit::testing::make_test_cluster(2, 1, 1, 1);
  const CallSchedule calls{
      .calls = {Call{.label = "c",
                     .quantizes = {RankCast{Rank{1}, Bytes{2'000'000}, QuantScheme::kFp8Block128},
                                   RankCast{Rank{1}, Bytes{1'000'000}, QuantScheme::kMxfp8}},
                     .transfers = {0}}}};
  const auto out = tasks_of(plan, calls, {0}, cluster);
  const Model& m = out.model;
  ASSERT_EQ(m.task_count(), 5);
  EXPECT_EQ(deps(m, 2), (std::vector<std::int32_t>{1, 0}));
  EXPECT_EQ(deps(m, 3), (std::vector<std::int32_t>{1, 0, 2}));
}

TEST(CallTasks, AfterACollectiveARankQuantizesOnceTheCollectiveHasEnded) {
  // A broadcast from rank 0 to rank 1, then rank 1 quantizes and copies: task 0 the start, tasks
  // 1..k the collective's channels, k + 1 the quantization after all of them and the start, k + 2
  // the copy after it.
  const auto plan = plan_of({}, 1);
  const auto cluster = refit::testing::make_test_cluster(2, 1, 1, 1);
  const CallSchedule calls{.calls = {Call{.label = "b",
                                          .copies_after = {RankCopy{Rank{1}, Bytes{1'000}}},
                                          .quantizes = {RankCast{Rank{1}, Bytes{2'000}, QuantScheme::kMxfp8}},
                                          .collective = Collective{.kind = CollectiveKind::kBroadcast,
                                                                   .ranks = {Rank{0}, Rank{1}},
                                                                   .bytes = Bytes{2'000}}}}};
  const auto out = tasks_of(plan, calls, {}, cluster);
  const Model& m = out.model;
  const std::int32_t quantize = m.task_count() - 3;
  ASSERT_GE(quantize, 2);
  std::vector<std::int32_t> collective(static_cast<std::size_t>(quantize - 1));
  std::iota(collective.begin(), collective.end(), 1);
  collective.push_back(0);
  EXPECT_EQ(deps(m, quantize), collective);
  EXPECT_EQ(m.category(TaskId{quantize}), static_cast<std::uint32_t>(TaskKind::kQuantize));
  EXPECT_EQ(deps(m, quantize + 1), (std::vector<std::int32_t>{quantize}));
}

}  // namespace
}  // namespace refit::sim
