// Elastic refit on the UCX executor, ranks as threads of one process (membership.h): an engine
// whose rank stops mid-transfer costs the others nothing, a process of an old membership is
// fenced out before it writes anything, and a prepared plan runs over 100 memberships in a row
// with memory flat.
//
// The problem: w [64, 96] bf16, rows split over training ranks 0 and 1 (S0: rows 0..31, 32..63);
// three inference engines of two ranks each (ranks 2-3, 4-5, 6-7), each a replica (R) with its
// columns split over its two ranks (S1: 48 each). Every destination rank gets rows 0..31 from rank
// 0 and rows 32..63 from rank 1. With `direct` nothing is relayed, so losing one engine costs no
// other engine anything; with `refit` the engines may relay, and a relay's loss shows as missed.
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <barrier>
#include <fstream>
#include <functional>
#include <latch>
#include <optional>

#include "refit/executors/delta_executor.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/membership.h"
#include "refit/executors/ucx_executor.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"
#include "thread_bootstrap.h"

namespace refit {
namespace {

constexpr std::int32_t kWorld = 8;
constexpr std::int32_t kEngines = 3;
const Shape kShape{64, 96};

ReshardProblem elastic_problem() {
  using testing::make_layout;
  using testing::rank_range;
  return ReshardProblem::make(
             {testing::make_reshard("w", kShape, make_layout(kShape, {2}, rank_range(0, 2), "S0"),
                                    make_layout(kShape, {kEngines, 2}, rank_range(2, 6), "R,S1"))},
             2, 6)
      .value();
}

Plan elastic_plan(const ReshardProblem& problem, std::string_view strategy) {
  // One node for training, one per engine: each engine is its own NVLink domain.
  return make_plan(strategy, problem, testing::make_test_cluster(4, 2, 2, 6),
                   PlanOptions{.chunk = Bytes{256}})
      .value();
}

std::int32_t engine_of(std::int32_t rank) { return rank < 2 ? kNoEngine : (rank - 2) / 2; }

EngineMembership membership(std::uint64_t epoch,
                            std::vector<bool> members = std::vector<bool>(kEngines, true)) {
  auto m = consecutive_engines(2, 6, 2, epoch).value();
  m.members = std::move(members);
  return m;
}

struct RankRun {
  std::optional<Error> error;
  std::optional<EngineOutcomes> engines;
  std::optional<Error> wrong_data;            // a rank of a completed engine whose data is not right
  std::int64_t rows_from_rank_1_written = 0;  // destination bytes of rows 32..63 not zero
  Bytes received;                             // what the report says this rank received
};

// What rank `r` does once prepared: its executions.
using RankBody = std::function<void(std::int32_t, Executor&, PreparedPlan&, HostShards&, RankRun&)>;

std::vector<RankRun> run_elastic(const ReshardProblem& problem, const Plan& plan,
                                 const std::function<ExecutorOptions(std::int32_t)>& options,
                                 const RankBody& body) {
  std::vector<RankRun> out(kWorld);
  testing::run_ranks(kWorld, [&](std::int32_t r, Bootstrap& bootstrap) {
    auto executor = make_ucx_executor(bootstrap, options(r));
    ASSERT_TRUE(executor) << executor.error().message;
    auto shards = HostShards::allocate(problem, Rank{r});
    auto prepared = (*executor)->prepare(plan, Rank{r}, shards.buffers());
    ASSERT_TRUE(prepared) << prepared.error().message;
    body(r, **executor, **prepared, shards, out[static_cast<std::size_t>(r)]);
  });
  return out;
}

ExecutorOptions quick(std::int32_t) { return ExecutorOptions{.timeout = Seconds{1.0}}; }

// One execution under `m`; a rank of a completed engine checks its data.
void execute_once(const ReshardProblem& problem, std::int32_t r, Executor& e, PreparedPlan& p,
                  HostShards& shards, RankRun& run, const EngineMembership& m) {
  ASSERT_TRUE(e.set_membership(m));
  auto report = e.execute(p);
  if (!report) {
    run.error = report.error();
    return;
  }
  run.engines = report->engines;
  run.received = report->bytes_received;
  ASSERT_TRUE(run.engines);
  if (std::ranges::find(run.engines->completed, engine_of(r)) != run.engines->completed.end())
    if (auto ok = shards.verify(problem); !ok) run.wrong_data = ok.error();
  // Bytes of rows 32..63 (the second half of every destination box: the boxes are [64, 48]).
  for (const auto& d : shards.buffers().destinations)
    run.rows_from_rank_1_written += std::ranges::count_if(d.bytes.subspan(d.bytes.size() / 2),
                                                          [](std::byte b) { return b != std::byte{0}; });
}

void expect_survivors_agree(const std::vector<RankRun>& runs, std::int32_t except,
                            const EngineOutcomes& want) {
  for (std::int32_t r = 0; r < kWorld; ++r) {
    if (r == except) continue;
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    const auto& run = runs[static_cast<std::size_t>(r)];
    ASSERT_FALSE(run.error) << run.error->message;
    ASSERT_TRUE(run.engines);
    EXPECT_EQ(run.engines->completed, want.completed);
    EXPECT_EQ(run.engines->missed, want.missed);
    EXPECT_FALSE(run.wrong_data) << run.wrong_data->message;
  }
}

// Transfers from a rank of `engine` to a rank of another engine: data it relays for them.
std::int64_t relayed_for_others(const Plan& plan, std::int32_t engine) {
  return std::ranges::count_if(plan.transfers, [&](const Transfer& t) {
    return engine_of(t.sender.value) == engine && engine_of(t.receiver.value) != engine;
  });
}

// Rank 4 (engine 1) stops in the middle of the execution, silent as a dead process (its thread
// waits inside the executor until every other rank has ended), then gives up. Every other engine
// completes, verified, and engine 1 is named as missed: with `direct` nothing else needed rank 4's
// engine; with `refit` engine 1 relays data for the others, and the repair step re-feeds them
// from the training ranks within the same execute().
TEST(UcxElastic, AnEngineThatStopsMidTransferCostsTheOthersNothing) {
  const auto problem = elastic_problem();
  for (const auto* strategy : {"direct", "refit"}) {
    SCOPED_TRACE(strategy);
    const auto plan = elastic_plan(problem, strategy);
    EXPECT_EQ(relayed_for_others(plan, 1) > 0, std::string_view(strategy) == "refit");
    std::latch others_ended(kWorld - 1);
    const auto options = [&](std::int32_t r) {
      auto o = quick(r);
      if (r == 4)
        o.interrupted = [&] {
          others_ended.wait();
          return true;
        };
      return o;
    };
    const auto runs =
        run_elastic(problem, plan, options,
                    [&](std::int32_t r, Executor& e, PreparedPlan& p, HostShards& shards, RankRun& run) {
                      execute_once(problem, r, e, p, shards, run, membership(1));
                      if (r != 4) others_ended.count_down();
                    });
    ASSERT_TRUE(runs[4].error);
    EXPECT_NE(runs[4].error->message.find("interrupted"), std::string::npos) << runs[4].error->message;
    expect_survivors_agree(runs, 4, {.completed = {0, 2}, .missed = {1}});
  }
}

// One execution in which rank `stale` is still at membership epoch 1 and the others at epoch 2.
std::vector<RankRun> run_with_stale(const ReshardProblem& problem, std::int32_t stale) {
  return run_elastic(problem, elastic_plan(problem, "direct"), quick,
                     [&](std::int32_t r, Executor& e, PreparedPlan& p, HostShards& shards, RankRun& run) {
                       execute_once(problem, r, e, p, shards, run, membership(r == stale ? 1 : 2));
                     });
}

// Training rank 1 still runs membership epoch 1 when the others have moved to epoch 2: it is
// refused at its first message (fenced out), writes nothing (rows 32..63 of every destination stay
// zero), and every engine misses the step, since all need its rows.
TEST(UcxElastic, AStaleSenderIsFencedOutBeforeItWritesAnything) {
  const auto problem = elastic_problem();
  const auto runs = run_with_stale(problem, 1);
  ASSERT_TRUE(runs[1].error);
  EXPECT_NE(runs[1].error->message.find("fenced out"), std::string::npos) << runs[1].error->message;
  expect_survivors_agree(runs, 1, {.completed = {}, .missed = {0, 1, 2}});
  // The reports count what completed: rank 0's rows of each destination box, 32 x 48 bf16 = 3072 B.
  for (std::int32_t r = 2; r < kWorld; ++r) {
    EXPECT_EQ(runs[static_cast<std::size_t>(r)].rows_from_rank_1_written, 0) << r;
    EXPECT_EQ(runs[static_cast<std::size_t>(r)].received, Bytes{3072}) << r;
  }
}

// Inference rank 6 (engine 2) is the stale one: it is fenced out, engine 2 misses the step,
// engines 0 and 1 complete.
TEST(UcxElastic, AStaleEngineIsFencedOutAndTheOthersComplete) {
  const auto problem = elastic_problem();
  const auto runs = run_with_stale(problem, 6);
  ASSERT_TRUE(runs[6].error);
  EXPECT_NE(runs[6].error->message.find("fenced out"), std::string::npos) << runs[6].error->message;
  expect_survivors_agree(runs, 6, {.completed = {0, 1}, .missed = {2}});
}

// A bad membership is refused naming what is wrong; delta refit, which cannot be elastic, says so.
TEST(UcxElastic, SetMembershipRefusesWhatDoesNotFit) {
  testing::run_ranks(2, [&](std::int32_t, Bootstrap& bootstrap) {
    auto executor = make_ucx_executor(bootstrap, quick(0)).value();
    auto wrong = consecutive_engines(1, 2, 1).value();  // 3 ranks, the world has 2
    const auto refused = executor->set_membership(wrong);
    ASSERT_FALSE(refused);
    EXPECT_NE(refused.error().message.find("membership"), std::string::npos) << refused.error().message;
    auto zero = consecutive_engines(1, 1, 1, 0).value();
    EXPECT_FALSE(executor->set_membership(zero));
    // A delta step agrees with every rank through the bootstrap: not elastic.
    DeltaExecutor delta(std::move(executor), bootstrap);
    const auto delta_refused = delta.set_membership(consecutive_engines(1, 1, 1).value());
    ASSERT_FALSE(delta_refused);
    EXPECT_EQ(delta_refused.error().code, ErrorCode::kUnsupported);
  });
}

std::int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  std::int64_t pages = 0;
  std::int64_t resident = 0;
  statm >> pages >> resident;
  return resident * sysconf(_SC_PAGESIZE);
}

std::uint64_t checksum(const HostShards& shards) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a
  for (const auto& d : shards.buffers().destinations)
    for (const auto b : d.bytes) h = (h ^ static_cast<std::uint8_t>(b)) * 1099511628211ULL;
  return h;
}

// 100 membership changes over one prepared plan: each execution leaves one engine out in turn
// (every fourth none). Every member engine completes verified, a non-member's weights stay as
// they were, and resident memory after the 100th change is within 4 MiB of what it was after the
// 10th (a leak of 45 KB per change would exceed that).
TEST(UcxElastic, HundredMembershipChangesReuseThePreparedPlanWithMemoryFlat) {
  constexpr std::int32_t kChanges = 100;
  constexpr std::int64_t kMargin = 4 << 20;
  const auto problem = elastic_problem();
  const auto plan = elastic_plan(problem, "direct");
  std::int64_t after_warm_up = 0;
  std::int64_t at_end = 0;
  // Rank 0 reads the resident memory while every rank waits between two executions, so that no
  // execution's transient memory counts. No rank leaves the loop early: all meet at the barrier.
  std::barrier quiet(kWorld);
  const auto measure = [&](std::int32_t r, std::int64_t& into) {
    quiet.arrive_and_wait();
    if (r == 0) into = resident_bytes();
    quiet.arrive_and_wait();
  };
  const auto runs = run_elastic(
      problem, plan, [](std::int32_t) { return ExecutorOptions{.timeout = Seconds{10}}; },
      [&](std::int32_t r, Executor& e, PreparedPlan& p, HostShards& shards, RankRun& run) {
        for (std::int32_t i = 0; i < kChanges; ++i) {
          std::vector<bool> members(kEngines, true);
          if (i % 4 != 3) members[static_cast<std::size_t>(i % kEngines)] = false;
          const bool member = r < 2 || members[static_cast<std::size_t>(engine_of(r))];
          if (member) shards.clear_destinations();
          const auto before = checksum(shards);
          if (!run.error && !run.wrong_data)
            execute_once(problem, r, e, p, shards, run,
                         membership(static_cast<std::uint64_t>(i) + 1, members));
          if (!member) EXPECT_EQ(checksum(shards), before) << "rank " << r << ", change " << i;
          if (run.engines) EXPECT_TRUE(run.engines->missed.empty()) << "rank " << r << ", change " << i;
          if (i == 9) measure(r, after_warm_up);
        }
        measure(r, at_end);
      });
  for (std::int32_t r = 0; r < kWorld; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    EXPECT_FALSE(runs[static_cast<std::size_t>(r)].error) << runs[static_cast<std::size_t>(r)].error->message;
    EXPECT_FALSE(runs[static_cast<std::size_t>(r)].wrong_data)
        << runs[static_cast<std::size_t>(r)].wrong_data->message;
  }
  EXPECT_GT(after_warm_up, 0);
  EXPECT_LT(at_end - after_warm_up, kMargin)
      << "after 10 changes " << after_warm_up << " B, after 100 " << at_end;
  RecordProperty("resident_growth_bytes", std::to_string(at_end - after_warm_up));
}

}  // namespace
}  // namespace refit
