// run_program through fake backends: it issues every op in program order, stays at most `window`
// steps ahead of the GPU, and turns a GPU that makes no progress, or a failing call, into an
// error naming the step and its traffic, after aborting the communicator. Never a hang.
#include <algorithm>
#include <set>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "nccl_fixture.h"
#include "refit/planner/strategy.h"
#include "run_program.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::nccl_detail::testing {
namespace {

// Rows of a [40, 10] fp32 tensor over 2 ranks to columns over 2, in 64-byte chunks with 256 bytes
// of staging: many steps. Communicator rank 2 (the first receiver) keeps its program.
struct SmallRun {
  ReshardProblem problem =
      ReshardProblem::make(
          {refit::testing::make_reshard(
              "w", {40, 10},
              refit::testing::make_layout({40, 10}, {2}, refit::testing::rank_range(0, 2), "S0"),
              refit::testing::make_layout({40, 10}, {2}, refit::testing::rank_range(2, 2), "S1"),
              DType::kFP32)},
          2, 2)
          .value();
  Plan plan = make_plan("direct", problem, refit::testing::make_test_cluster(1, 4, 2, 2),
                        PlanOptions{.chunk = Bytes{64}, .broadcast_buffer = Bytes{1 << 20}})
                  .value();
  HostRanks ranks = make_host_ranks(problem);
  Processes processes = make_processes(plan, ranks, comm_map(Mapping::kOnePerProcess, 4), Bytes{256}).value();
  const Program& program() const { return processes.programs[2]; }
};

// A GPU that runs everything the moment it is issued.
class InstantBackend : public Backend {
 public:
  [[nodiscard]] Result<void> issue(const Op& op, Clock::time_point) override {
    issued.push_back(&op);
    if (const auto* r = std::get_if<Record>(&op)) recorded.insert(r->event);
    return {};
  }
  [[nodiscard]] Result<bool> reached(std::int32_t event) override {
    polls.emplace_back(event, issued.size());
    return recorded.contains(event);
  }
  void abort() override { ++aborts; }

  std::vector<const Op*> issued;
  std::set<std::int32_t> recorded;
  std::vector<std::pair<std::int32_t, std::size_t>> polls;  // event, ops issued by then
  int aborts = 0;
};

TEST(RunProgram, IssuesEveryOpInOrderAndStaysWithinTheWindow) {
  const SmallRun run;
  const auto& p = run.program();
  ASSERT_GT(p.blocks.size(), 6u);
  InstantBackend backend;
  const RunOptions options{.timeout = Seconds{5.0}, .window = 3, .on_chunk_sent = {}};
  ASSERT_TRUE(run_program(p, backend, options));
  ASSERT_EQ(backend.issued.size(), p.ops.size());
  for (std::size_t i = 0; i < p.ops.size(); ++i) EXPECT_EQ(backend.issued[i], &p.ops[i]);
  // Before block b + window is issued, block b's "done" was seen reached.
  for (std::size_t b = 0; b + 3 < p.blocks.size(); ++b) {
    const auto it = std::ranges::find(backend.polls, p.blocks[b].done_event,
                                      &std::pair<std::int32_t, std::size_t>::first);
    ASSERT_NE(it, backend.polls.end()) << "block " << b;
    EXPECT_LE(it->second, p.blocks[b + 3].first_op);
  }
  EXPECT_EQ(backend.polls.back().first, p.final_event);
  EXPECT_EQ(backend.aborts, 0);
}

TEST(RunProgram, TellsOfEverySentChunkOnceInOrder) {
  const SmallRun run;
  std::vector<std::pair<std::int32_t, std::int64_t>> told, sent;
  for (const auto& op : run.processes.programs[0].ops)  // a sender
    if (const auto* p = std::get_if<P2p>(&op); p && p->direction == Direction::kSend)
      sent.emplace_back(p->transfer, p->chunk);
  InstantBackend backend;
  RunOptions options{.timeout = Seconds{5.0},
                     .window = 2,
                     .on_chunk_sent = [&](std::int32_t t, std::int64_t k) { told.emplace_back(t, k); }};
  ASSERT_TRUE(run_program(run.processes.programs[0], backend, options));
  EXPECT_FALSE(sent.empty());
  EXPECT_EQ(told, sent);
}

// A GPU that never finishes anything: a dead peer.
class StuckBackend : public InstantBackend {
 public:
  [[nodiscard]] Result<bool> reached(std::int32_t) override { return false; }
};

TEST(RunProgram, AStuckStepTimesOutAbortsAndNamesTheStepAndItsPeers) {
  const SmallRun run;
  StuckBackend backend;
  const auto start = Clock::now();
  const auto result = run_program(run.program(), backend,
                                  RunOptions{.timeout = Seconds{0.05}, .window = 2, .on_chunk_sent = {}});
  ASSERT_FALSE(result);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(result.error().code, ErrorCode::kTimeout);
  EXPECT_EQ(backend.aborts, 1);
  const auto& m = result.error().message;
  EXPECT_NE(m.find(fmt::format("step {} (1 of", run.program().blocks[0].step)), std::string::npos) << m;
  EXPECT_NE(m.find("rank 2 receives from rank "), std::string::npos) << m;
  EXPECT_NE(m.find("(transfer "), std::string::npos) << m;
  EXPECT_NE(m.find("no progress for 0.05 s"), std::string::npos) << m;
}

// Ctrl-C while the GPU is stuck: the run ends within a poll or two of the question saying yes,
// not at the 60 s timeout, with the communicator aborted once and the step named.
TEST(RunProgram, AnInterruptEndsTheWaitAndAbortsLongBeforeTheTimeout) {
  const SmallRun run;
  StuckBackend backend;
  int asked = 0;
  const auto start = Clock::now();
  const auto result =
      run_program(run.program(), backend,
                  RunOptions{.timeout = Seconds{60.0}, .window = 2, .on_chunk_sent = {}, .interrupted = [&] {
                               return ++asked >= 2;
                             }});
  ASSERT_FALSE(result);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(5));
  EXPECT_EQ(asked, 2);  // asked at most every kInterruptPoll, not at every poll of the GPU
  EXPECT_EQ(backend.aborts, 1);
  EXPECT_EQ(result.error().code, ErrorCode::kRuntime);
  const auto& m = result.error().message;
  EXPECT_NE(m.find("interrupted"), std::string::npos) << m;
  EXPECT_EQ(m.rfind(fmt::format("step {} (1 of", run.program().blocks[0].step), 0), 0u) << m;
}

// A call that fails, and an asynchronous error found while waiting: a peer that failed, as
// nccl_error() reports ncclRemoteError.
class FailingBackend : public InstantBackend {
 public:
  bool fail_issue = false;
  [[nodiscard]] Result<void> issue(const Op& op, Clock::time_point deadline) override {
    if (fail_issue && std::holds_alternative<GroupEnd>(op))
      return fail(ErrorCode::kPeerFailed, "ncclGroupEnd: remote error");
    return InstantBackend::issue(op, deadline);
  }
  [[nodiscard]] Result<bool> reached(std::int32_t) override {
    return fail(ErrorCode::kPeerFailed, "NCCL (asynchronous error): remote process exited");
  }
};

TEST(RunProgram, FailuresAbortAndNameWhereTheyHappened) {
  const SmallRun run;
  FailingBackend issuing;
  issuing.fail_issue = true;
  auto result = run_program(run.program(), issuing,
                            RunOptions{.timeout = Seconds{1.0}, .window = 2, .on_chunk_sent = {}});
  ASSERT_FALSE(result);
  EXPECT_EQ(issuing.aborts, 1);
  EXPECT_EQ(result.error().code, ErrorCode::kPeerFailed);
  EXPECT_EQ(result.error().message,
            fmt::format("step {}: ncclGroupEnd: remote error", run.program().blocks[0].step));

  FailingBackend polling;
  result = run_program(run.program(), polling,
                       RunOptions{.timeout = Seconds{1.0}, .window = 2, .on_chunk_sent = {}});
  ASSERT_FALSE(result);
  EXPECT_EQ(polling.aborts, 1);
  EXPECT_EQ(result.error().code, ErrorCode::kPeerFailed);
  EXPECT_NE(result.error().message.find("remote process exited"), std::string::npos);
  EXPECT_EQ(result.error().message.rfind("step ", 0), 0u) << result.error().message;
}

}  // namespace
}  // namespace refit::nccl_detail::testing
