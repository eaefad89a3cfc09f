// The NCCL executor's translation, checked on CPUs for every strategy: the recorded programs of
// all processes move every byte of every transfer once (check_coverage), pair their sends and
// receives per step so NCCL cannot deadlock (check_pairing), forward an element only after the
// step that delivered it (check_relays), keep staging within its bound (check_staging), and never
// let two copies of one kernel launch touch the same bytes (check_batches). The
// strongest check runs them: program_sim executes every process's program on host memory, with
// the copy kernels' own item code and each step's group matched across processes, under two
// stream orders, and every destination buffer must then hold the test pattern.
#include <algorithm>

#include <gtest/gtest.h>

#include "nccl_fixture.h"
#include "program_checks.h"
#include "program_sim.h"
#include "random_problems.h"
#include "refit/lowering/step_schedule.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::nccl_detail::testing {
namespace {

using refit::testing::make_layout;
using refit::testing::make_reshard;
using refit::testing::make_test_cluster;
using refit::testing::rank_range;

struct Scenario {
  const char* name;
  ReshardProblem problem;
};

// Small problems that between them take every path: contiguous and strided boxes, uneven and
// empty shards, element sizes 1, 2, 4 and 8, up to 8 dims, mixed dtypes in one message, and
// replicated destinations (relays).
std::vector<Scenario> scenarios() {
  std::vector<Scenario> out;
  const auto add = [&](const char* name, std::vector<TensorReshard> t, std::int32_t src, std::int32_t dst) {
    out.push_back(Scenario{.name = name, .problem = ReshardProblem::make(std::move(t), src, dst).value()});
  };
  add("rows to columns, fp32",
      {make_reshard("w", {12, 10}, make_layout({12, 10}, {3}, rank_range(0, 3), "S0"),
                    make_layout({12, 10}, {4}, rank_range(3, 4), "S1"), DType::kFP32)},
      3, 4);
  add("replicated destinations, bf16",
      {make_reshard("w", {64, 24}, make_layout({64, 24}, {2}, rank_range(0, 2), "S0"),
                    make_layout({64, 24}, {2, 2}, rank_range(2, 4), "S1,R"))},
      2, 4);
  add("3-d uneven int8",
      {make_reshard("w", {5, 7, 9}, make_layout({5, 7, 9}, {2, 2}, rank_range(0, 4), "S0,S2"),
                    make_layout({5, 7, 9}, {3}, rank_range(4, 3), "S1"), DType::kInt8)},
      4, 3);
  add("4-d fp64",
      {make_reshard("w", {3, 4, 5, 6}, make_layout({3, 4, 5, 6}, {2}, rank_range(0, 2), "S3"),
                    make_layout({3, 4, 5, 6}, {2, 2}, rank_range(2, 4), "S1,S0"), DType::kFP64)},
      2, 4);
  add("mixed dtypes in one message",
      {make_reshard("a", {7, 5}, make_layout({7, 5}, {2}, rank_range(0, 2), "S0"),
                    make_layout({7, 5}, {2}, rank_range(2, 2), "S1"), DType::kInt8),
       make_reshard("b", {6, 6}, make_layout({6, 6}, {2}, rank_range(0, 2), "S1"),
                    make_layout({6, 6}, {2}, rank_range(2, 2), "S0"), DType::kFP16),
       make_reshard("c", {10}, make_layout({10}, {2}, rank_range(0, 2), "R"),
                    make_layout({10}, {2}, rank_range(2, 2), "S0"), DType::kFP64),
       make_reshard("d", {4, 4, 4}, make_layout({4, 4, 4}, {2}, rank_range(0, 2), "S2"),
                    make_layout({4, 4, 4}, {2}, rank_range(2, 2), "S1"), DType::kFP32)},
      2, 2);
  add("same layout, contiguous",
      {make_reshard("w", {16, 8}, make_layout({16, 8}, {2}, rank_range(0, 2), "S0"),
                    make_layout({16, 8}, {2}, rank_range(2, 2), "S0"))},
      2, 2);
  add("8-d bf16",
      {make_reshard("w", {2, 2, 2, 2, 2, 2, 2, 3},
                    make_layout({2, 2, 2, 2, 2, 2, 2, 3}, {2}, rank_range(0, 2), "S7"),
                    make_layout({2, 2, 2, 2, 2, 2, 2, 3}, {2, 2}, rank_range(2, 4), "S0,S5"))},
      2, 4);
  add("shrinking TP with empty shards",
      {make_reshard("w", {5, 3}, make_layout({5, 3}, {4}, rank_range(0, 4), "S0"),
                    make_layout({5, 3}, {4}, rank_range(4, 4), "S1"), DType::kFP32)},
      4, 4);
  return out;
}

// Runs the plan on CPUs for one mapping and staging size and checks everything above.
void run_and_check(const ReshardProblem& problem, const Plan& plan, Mapping mapping, Bytes staging) {
  for (const auto policy : {SimPolicy::kCopyFirst, SimPolicy::kCommFirst}) {
    SCOPED_TRACE(policy == SimPolicy::kCopyFirst ? "copy stream first" : "comm stream first");
    auto ranks = make_host_ranks(problem);
    auto processes = make_processes(plan, ranks, comm_map(mapping, plan.world_size()), staging);
    ASSERT_TRUE(processes) << processes.error().message;
    if (policy == SimPolicy::kCopyFirst) {
      auto ok = check_coverage(plan, *processes);
      EXPECT_TRUE(ok) << ok.error().message;
      ok = check_pairing(*processes);
      EXPECT_TRUE(ok) << ok.error().message;
      ok = check_relays(plan, *processes);
      EXPECT_TRUE(ok) << ok.error().message;
      ok = check_staging(*processes, staging);
      EXPECT_TRUE(ok) << ok.error().message;
      ok = check_batches(*processes);
      EXPECT_TRUE(ok) << ok.error().message;
    }
    const auto sim = processes->sim();
    auto ran = simulate(sim, policy);
    ASSERT_TRUE(ran) << ran.error().message;
    auto verified = verify_destinations(problem, ranks);
    EXPECT_TRUE(verified) << verified.error().message;
  }
}

class EveryStrategy : public ::testing::TestWithParam<std::string_view> {};

TEST_P(EveryStrategy, ScenariosRunToTheRightBytesOnCpus) {
  std::int64_t relays = 0;
  for (const auto& s : scenarios()) {
    const auto cluster = make_test_cluster(2, 4, s.problem.source_ranks(), s.problem.destination_ranks());
    // Tiny chunks and staging force many chunks, steps and pipelined relays; the defaults take
    // the direct paths with whole messages.
    for (const auto chunk : {Bytes{48}, Bytes{8 << 20}}) {
      auto plan = make_plan(GetParam(), s.problem, cluster,
                            PlanOptions{.chunk = chunk, .broadcast_buffer = Bytes{1 << 20}});
      ASSERT_TRUE(plan) << plan.error().message;
      for (const auto& t : plan->transfers) relays += static_cast<std::int64_t>(t.upstream().size());
      for (const auto mapping : {Mapping::kOnePerProcess, Mapping::kAllInOne, Mapping::kPairs})
        for (const auto staging : {Bytes{64}, Bytes{1000}, Bytes{256 << 20}}) {
          SCOPED_TRACE(::testing::Message() << s.name << ", chunk " << chunk.value << ", mapping "
                                            << static_cast<int>(mapping) << ", staging " << staging.value);
          run_and_check(s.problem, *plan, mapping, staging);
        }
    }
  }
  // Every strategy but direct forwards data somewhere in these scenarios.
  if (GetParam() != "direct") {
    EXPECT_GT(relays, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(Nccl, EveryStrategy, ::testing::ValuesIn(strategy_names()), [](const auto& info) {
  std::string name(info.param);
  std::ranges::replace(name, '-', '_');
  return name;
});

// The executor posts each chunk in the step the lowering's schedule gives it, with the chunks per
// step of the refit-nccl execution model: the schedule the simulator simulates (step_tasks.h) is
// the one the executor runs. Every chunk of every transfer is sent exactly once, in that step.
TEST(NcclTranslation, EveryChunkIsSentInTheStepTheSimulatedScheduleGivesIt) {
  std::int64_t checked = 0;
  for (const auto& s : scenarios()) {
    const auto cluster = make_test_cluster(2, 4, s.problem.source_ranks(), s.problem.destination_ranks());
    for (const auto* strategy : {"refit", "gather-broadcast"})
      for (const auto staging : {Bytes{64}, Bytes{1000}}) {
        SCOPED_TRACE(::testing::Message() << s.name << ", " << strategy << ", staging " << staging.value);
        const auto plan = make_plan(strategy, s.problem, cluster, PlanOptions{.chunk = Bytes{48}}).value();
        const auto lowered = lowering::LoweredPlan::make(plan, staging).value();
        const auto schedule =
            lowering::make_step_schedule(lowered, execution_model(ExecutionModelId::kRefitNccl).step_chunks)
                .value();
        auto ranks = make_host_ranks(s.problem);
        const auto processes =
            make_processes(plan, ranks, comm_map(Mapping::kOnePerProcess, plan.world_size()), staging)
                .value();
        std::vector<std::vector<std::int32_t>> sent(plan.transfers.size());
        for (const auto& program : processes.programs)
          for (const auto& op : program.ops)
            if (const auto* p = std::get_if<P2p>(&op); p && p->direction == Direction::kSend) {
              auto& steps = sent[static_cast<std::size_t>(p->transfer)];
              steps.resize(std::max(steps.size(), static_cast<std::size_t>(p->chunk) + 1), -1);
              EXPECT_EQ(steps[static_cast<std::size_t>(p->chunk)], -1) << "chunk sent twice";
              steps[static_cast<std::size_t>(p->chunk)] = p->step;
              ++checked;
            }
        for (const auto& t : plan.transfers)
          if (!t.quantizes())
            EXPECT_EQ(sent[static_cast<std::size_t>(t.id)], schedule.step[static_cast<std::size_t>(t.id)]);
      }
  }
  EXPECT_GT(checked, 1000);
}

// A relay whose message mixes a segment the relay keeps with one it keeps only partly: the
// chunk cannot be received in place, so it goes through staging, and the kept part of the second
// segment is extracted from staging in the same kernel that unpacks the rest to scratch.
TEST(NcclTranslation, APartlyKeptRelayedSegmentIsExtractedFromStaging) {
  // [4, 4] fp32 on rank 0; rank 1 keeps rows 0-1, rank 2 rows 2-3. Rank 0 sends row 0 and rows
  // 1-3 to rank 1, which keeps row 1 of the second segment and forwards rows 2-3 to rank 2.
  const auto problem =
      ReshardProblem::make({make_reshard("w", {4, 4}, make_layout({4, 4}, {1}, rank_range(0, 1), "R"),
                                         make_layout({4, 4}, {2}, rank_range(1, 2), "S0"), DType::kFP32)},
                           1, 2)
          .value();
  Plan plan;
  plan.strategy = "hand-made";
  plan.tensors = {problem.tensors()[0].tensor};
  plan.source_ranks = 1;
  plan.destination_ranks = 2;
  plan.transfers = {Transfer{.id = 0,
                             .sender = Rank{0},
                             .receiver = Rank{1},
                             .link = LinkKind::kNvlink,
                             .segments = {Segment{.tensor = 0, .box = Box{{0, 0}, {1, 4}}},
                                          Segment{.tensor = 0, .box = Box{{1, 0}, {3, 4}}}},
                             .bytes = Bytes{64},
                             .chunk = Bytes{1 << 20}},
                    Transfer{.id = 1,
                             .sender = Rank{1},
                             .receiver = Rank{2},
                             .link = LinkKind::kNvlink,
                             .segments = {Segment{.tensor = 0, .box = Box{{2, 0}, {2, 4}}, .via = 0}},
                             .bytes = Bytes{32},
                             .chunk = Bytes{1 << 20}}};
  ASSERT_TRUE(validate(plan, problem));
  run_and_check(problem, plan, Mapping::kOnePerProcess, Bytes{1 << 20});
  run_and_check(problem, plan, Mapping::kAllInOne, Bytes{64});
}

// Random problems (random_problems.h: multi-axis meshes over shuffled ranks, uneven, empty,
// replicated and strided boxes, every dtype), each strategy in turn, with a random chunk size,
// rank mapping and staging bound.
TEST(NcclTranslation, RandomProblemsRunToTheRightBytesOnCpus) {
  refit::testing::RandomProblems random(7);
  for (int i = 0; i < 120; ++i) {
    const auto src = static_cast<std::int32_t>(random.uniform(1, 4));
    const auto dst = static_cast<std::int32_t>(random.uniform(1, 4));
    const auto problem = random.problem(src, dst, random.uniform(1, 3), 9);
    const auto strategy = strategy_names()[static_cast<std::size_t>(i) % strategy_names().size()];
    auto plan =
        make_plan(strategy, problem, make_test_cluster(2, 4, src, dst),
                  PlanOptions{.chunk = Bytes{random.uniform(16, 200)}, .broadcast_buffer = Bytes{1 << 20}});
    ASSERT_TRUE(plan) << plan.error().message;
    const auto mapping = static_cast<Mapping>(random.uniform(0, 2));
    const Bytes staging{random.uniform(32, 600)};
    SCOPED_TRACE(::testing::Message() << "case " << i << " " << strategy << ", mapping "
                                      << static_cast<int>(mapping) << ", staging " << staging.value);
    run_and_check(problem, *plan, mapping, staging);
  }
}

}  // namespace
}  // namespace refit::nccl_detail::testing
