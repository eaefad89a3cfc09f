// The UCX executor with ranks as threads of one process. Every strategy must deliver every
// destination element exactly as the pattern says (verify_pattern checks each one); refusals
// happen at prepare on every rank; a rank that goes silent makes every other rank fail within
// the timeout, naming it.
#include <chrono>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "random_problems.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/ucx_executor.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "thread_bootstrap.h"
#include "ucx_harness.h"

namespace refit {
namespace {

using testing::expect_all_verified;
using testing::Outcome;
using testing::plan_for;
using testing::run_plan;
using testing::RunSpec;

// 2 training ranks on node 0, 2 inference ranks on node 1: refit lands each piece once on node 1
// and relays it over "NVLink"; chunks of 100 bytes split elements of 8-byte dtypes mid-element.
TEST(UcxExecutor, EveryStrategyDeliversRandomProblemsExactly) {
  testing::RandomProblems gen(7);
  for (int i = 0; i < 6; ++i) {
    const auto problem = gen.problem(2, 2);
    const auto cluster = testing::make_test_cluster(2, 2, 2, 2);
    for (const auto strategy : strategy_names()) {
      SCOPED_TRACE(::testing::Message() << "case " << i << " strategy " << strategy);
      const auto plan = plan_for(problem, cluster, strategy, Bytes{100});
      expect_all_verified(run_plan(problem, plan, {}));
    }
  }
}

// The same with every shard in memory the executor allocated: prepare publishes the allocation's
// own registration (which peers map and write into directly) for the shards carved from it.
TEST(UcxExecutor, EveryStrategyDeliversIntoExecutorAllocatedMemory) {
  testing::RandomProblems gen(13);
  RunSpec spec;
  spec.executor_memory = true;
  spec.executions = 2;
  for (int i = 0; i < 3; ++i) {
    const auto problem = gen.problem(2, 3);
    const auto cluster = testing::make_test_cluster(2, 3, 2, 3);
    for (const auto strategy : strategy_names()) {
      SCOPED_TRACE(::testing::Message() << "case " << i << " strategy " << strategy);
      expect_all_verified(run_plan(problem, plan_for(problem, cluster, strategy, Bytes{256}), spec));
    }
  }
}

std::int64_t stored_directly(const std::vector<Outcome>& outcomes) {
  std::int64_t sum = 0;
  for (const auto& o : outcomes) {
    EXPECT_LE(o.report.stored_directly.value, o.report.bytes_sent.value);
    sum += o.report.stored_directly.value;
  }
  return sum;
}

// Into executor-allocated (shared) memory, peers store directly by default; with direct_stores
// off every byte goes through ucp_put_nbx instead, and arrives just the same.
TEST(UcxExecutor, DirectStoresGoWhereMemoryIsMappedAndCanBeTurnedOff) {
  testing::RandomProblems gen(17);
  const auto problem = gen.problem(2, 2, 4, 20);
  const auto cluster = testing::make_test_cluster(2, 2, 2, 2);
  const auto plan = plan_for(problem, cluster, "refit", Bytes{4096});
  RunSpec spec;
  spec.executor_memory = true;
  auto direct = run_plan(problem, plan, spec);
  expect_all_verified(direct);
  EXPECT_GT(stored_directly(direct), 0);
  spec.options.direct_stores = false;
  auto through_ucx = run_plan(problem, plan, spec);
  expect_all_verified(through_ucx);
  EXPECT_EQ(stored_directly(through_ucx), 0);
}

TEST(UcxExecutor, ThreeToFiveRanksOverThreeNodes) {
  testing::RandomProblems gen(11);
  const auto problem = gen.problem(3, 5, 4, 20);
  const auto cluster = testing::make_test_cluster(3, 3, 3, 5);
  for (const auto strategy : strategy_names()) {
    SCOPED_TRACE(strategy);
    expect_all_verified(run_plan(problem, plan_for(problem, cluster, strategy, Bytes{256}), {}));
  }
}

// Staging for one 64-byte chunk (two slots, split between receiving and packing) forces every
// staged chunk to wait until the one before it has been unpacked.
TEST(UcxExecutor, TinyStagingStillDeliversEverything) {
  testing::RandomProblems gen(3);
  const auto problem = gen.problem(2, 3, 3, 16);
  const auto cluster = testing::make_test_cluster(1, 5, 2, 3);
  RunSpec spec;
  spec.options.staging = Bytes{128};
  for (const auto strategy : {"refit", "direct"}) {
    SCOPED_TRACE(strategy);
    expect_all_verified(run_plan(problem, plan_for(problem, cluster, strategy, Bytes{64}), spec));
  }
}

// The chunk rule: staging of 1 KiB cuts the plan's 64 KiB chunks into chunks of 512 bytes, and
// the refit still arrives whole.
TEST(UcxExecutor, SmallStagingCutsSmallerChunks) {
  const auto problem = testing::RandomProblems(3).problem(2, 3, 3, 300);
  const auto plan =
      plan_for(problem, testing::make_test_cluster(1, 5, 2, 3), "gather-broadcast", Bytes{64 << 10});
  RunSpec spec;
  spec.options.staging = Bytes{1024};
  expect_all_verified(run_plan(problem, plan, spec));
}

// A prepared plan runs again and again (one refit per training step).
TEST(UcxExecutor, RepeatedExecutionsOfOnePreparedPlan) {
  testing::RandomProblems gen(5);
  const auto problem = gen.problem(2, 2);
  const auto cluster = testing::make_test_cluster(2, 2, 2, 2);
  RunSpec spec;
  spec.executions = 4;
  expect_all_verified(run_plan(problem, plan_for(problem, cluster, "refit", Bytes{64}), spec));
}

TEST(UcxExecutor, RanksThatDisagreeOnThePlanHashRefuseAtPrepare) {
  testing::RandomProblems gen(9);
  const auto problem = gen.problem(2, 2);
  const auto plan = plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "direct", Bytes{64});
  RunSpec spec;
  spec.tweak = [](std::int32_t r, Plan& p, RankBuffers&) {
    if (r == 3) p.strategy += "-perturbed";
  };
  const auto outcomes = run_plan(problem, plan, spec);
  for (const auto& o : outcomes) {
    ASSERT_TRUE(o.error);
    EXPECT_FALSE(o.prepared);
    EXPECT_EQ(o.error->code, ErrorCode::kMismatch);
    EXPECT_NE(o.error->message.find("rank 3 has"), std::string::npos) << o.error->message;
    EXPECT_NE(o.error->message.find("ranks 0, 1, 2 have"), std::string::npos) << o.error->message;
  }
}

// What the sender did, in order: put chunk `chunk` (before_send) or announced it (on_chunk_sent).
struct SendEvent {
  bool announced = false;
  std::int64_t chunk = 0;
};

class RecordingGate final : public SendGate {
 public:
  explicit RecordingGate(std::vector<SendEvent>& events) : events_(events) {}
  void before_send(std::int32_t, std::int64_t chunk) override { events_.push_back({.chunk = chunk}); }
  void before_any_send() override {}

 private:
  std::vector<SendEvent>& events_;
};

// The receiver grants a pair `window` chunks ahead and each further one on a chunk's notice, so a
// sender that announced its chunks only after putting every chunk it held grants for would wait a
// round trip whenever they ran out. It announces what has flushed once half the window is left
// granted ahead. Here one transfer of 3 x window chunks of 512 bytes goes into executor memory,
// where the sender stores directly and a chunk's flush is done at once: chunk 0 must be announced
// before the window's last chunk is put, and every chunk once, after its put, in order.
TEST(UcxExecutor, ASenderAnnouncesEachChunkBeforeItsGrantsRunOut) {
  const std::int64_t window = execution_model(ExecutionModelId::kRefitUcx).pair_window;
  const Shape shape{3 * window, 256};  // bf16 rows of 512 bytes
  const auto problem =
      ReshardProblem::make(
          {testing::make_reshard("w", shape, testing::make_layout(shape, {1}, testing::rank_range(0, 1), "R"),
                                 testing::make_layout(shape, {1}, testing::rank_range(1, 1), "R"),
                                 DType::kBF16)},
          1, 1)
          .value();
  const auto plan = plan_for(problem, testing::make_test_cluster(2, 1, 1, 1), "refit", Bytes{512});
  ASSERT_EQ(plan.transfers.size(), 1u);
  std::vector<SendEvent> events;
  RecordingGate gate(events);
  std::vector<std::optional<Error>> errors(2);
  testing::run_ranks(2, [&](std::int32_t r, Bootstrap& bootstrap) {
    ExecutorOptions options;
    if (r == 0) options.on_chunk_sent = [&](std::int32_t, std::int64_t c) { events.push_back({true, c}); };
    auto executor = make_ucx_executor(bootstrap, options).value();
    if (r == 0) ASSERT_TRUE(executor->set_send_gate(&gate));
    auto shards = testing::shards_for(problem, r, *executor, /*executor_memory=*/true);
    auto prepared = executor->prepare(plan, Rank{r}, shards.buffers());
    ASSERT_TRUE(prepared) << prepared.error().message;
    auto report = executor->execute(**prepared);
    if (!report)
      errors[static_cast<std::size_t>(r)] = report.error();
    else if (r == 0)  // the premise: every chunk stored directly, so its flush is done at once
      EXPECT_EQ(report->stored_directly.value, report->bytes_sent.value);
    EXPECT_TRUE(shards.verify(problem)) << "rank " << r;
  });
  for (const auto& e : errors) EXPECT_FALSE(e) << e->message;
  const auto is = [](bool announced, std::int64_t chunk) {
    return [=](const SendEvent& e) { return e.announced == announced && e.chunk == chunk; };
  };
  const auto at = [&](bool announced, std::int64_t chunk) {
    return std::ranges::find_if(events, is(announced, chunk)) - events.begin();
  };
  ASSERT_EQ(events.size(), static_cast<std::size_t>(2 * 3 * window));
  EXPECT_LT(at(true, 0), at(false, window - 1));
  for (std::int64_t c = 0; c < 3 * window; ++c) {
    EXPECT_EQ(std::ranges::count_if(events, is(false, c)), 1) << "chunk " << c;
    EXPECT_EQ(std::ranges::count_if(events, is(true, c)), 1) << "chunk " << c;
    EXPECT_LT(at(false, c), at(true, c)) << "chunk " << c;
    if (c > 0) EXPECT_LT(at(true, c - 1), at(true, c)) << "chunk " << c;
  }
}

// A [8, 6] fp32 tensor, rows split over the training ranks, columns over the inference ranks.
ReshardProblem rows_to_columns() {
  const Shape shape{8, 6};
  return ReshardProblem::make(
             {testing::make_reshard(
                 "w", shape, testing::make_layout(shape, {2}, testing::rank_range(0, 2), "S0"),
                 testing::make_layout(shape, {2}, testing::rank_range(2, 2), "S1"), DType::kFP32)},
             2, 2)
      .value();
}

TEST(UcxExecutor, ABufferTooSmallIsRefusedAtPrepareOnEveryRank) {
  const auto problem = rows_to_columns();
  const auto plan = plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "refit", Bytes{64});
  RunSpec spec;
  spec.tweak = [](std::int32_t r, Plan&, RankBuffers& b) {
    if (r == 2) b.destinations.front().bytes = b.destinations.front().bytes.first(1);
  };
  const auto outcomes = run_plan(problem, plan, spec);
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    ASSERT_TRUE(outcomes[r].error);
    EXPECT_TRUE(outcomes[r].error->is_bad_input());
    EXPECT_EQ(outcomes[r].error->code, ErrorCode::kMismatch);
    EXPECT_NE(outcomes[r].error->message.find("holds 1 bytes"), std::string::npos)
        << outcomes[r].error->message;
    if (r != 2)
      EXPECT_NE(outcomes[r].error->message.find("rank 2"), std::string::npos) << outcomes[r].error->message;
  }
}

// Rank 1 prepares and then never executes: every other rank hears nothing from it and fails
// within about the timeout, naming it; nobody hangs.
TEST(UcxExecutor, ASilentRankMakesEveryOtherRankFailNamingIt) {
  testing::RandomProblems gen(13);
  const auto problem = gen.problem(2, 2, 3, 30);
  const auto plan = plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "refit", Bytes{64});
  RunSpec spec;
  spec.options.timeout = Seconds{1.0};
  spec.silent_rank = 1;
  const auto outcomes = run_plan(problem, plan, spec);
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    if (r == 1) continue;
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    ASSERT_TRUE(outcomes[r].error);
    EXPECT_TRUE(outcomes[r].error->code == ErrorCode::kTimeout ||
                outcomes[r].error->code == ErrorCode::kPeerFailed)
        << error_code_name(outcomes[r].error->code);
    EXPECT_NE(outcomes[r].error->message.find("rank 1 stopped responding"), std::string::npos)
        << outcomes[r].error->message;
    EXPECT_LT(outcomes[r].seconds, 2.5);
  }
}

}  // namespace
}  // namespace refit
