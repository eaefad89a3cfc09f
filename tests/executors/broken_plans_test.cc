// One set of broken plans (hand-edited plan files, say) fed to every executor's prepare: each
// refuses every one before touching a buffer, with the same error validate_structure() gives,
// code and message. The NCCL executor is represented by its first step at prepare, lowering the
// plan (LoweredPlan::make) before any device work; tests/gpu runs the rest.
#include <functional>

#include <gtest/gtest.h>

#include "refit/executors/sim_executor.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"
#ifdef REFIT_TEST_UCX
#include "ucx_harness.h"
#endif

namespace refit {
namespace {

struct Broken {
  const char* what;
  std::function<void(Plan&)> break_it;
};

// Every rule of validate_structure, broken once.
std::vector<Broken> broken_plans() {
  const auto first = [](Plan& p) -> Transfer& { return p.transfers.front(); };
  const auto last = [](Plan& p) -> Transfer& { return p.transfers.back(); };
  return {
      {"an id out of order", [=](Plan& p) { first(p).id = 7; }},
      {"a sender outside the world", [=](Plan& p) { first(p).sender = Rank{99}; }},
      {"a transfer to itself", [=](Plan& p) { first(p).receiver = first(p).sender; }},
      {"no segments", [=](Plan& p) { first(p).segments.clear(); }},
      {"a chunk of 0 bytes", [=](Plan& p) { first(p).chunk = Bytes{0}; }},
      {"a tensor that does not exist", [=](Plan& p) { first(p).segments.front().tensor = 5; }},
      {"a box outside its tensor", [=](Plan& p) { first(p).segments.front().box.offset[0] = 1000; }},
      {"bytes that do not add up", [=](Plan& p) { first(p).bytes += Bytes{1}; }},
      {"a via that is not earlier", [=](Plan& p) { last(p).segments.front().via = last(p).id; }},
      {"a tensor of 9 dims", [=](Plan& p) { p.tensors.front().shape = Shape(9, 1); }},
  };
}

// [64, 6] fp32 rows over 2 training ranks to rows replicated on 2 inference ranks in one domain:
// refit relays, so there is a later transfer with a `via` to break.
struct Relaying {
  ReshardProblem problem =
      ReshardProblem::make(
          {testing::make_reshard(
              "w", {64, 6}, testing::make_layout({64, 6}, {2}, testing::rank_range(0, 2), "S0"),
              testing::make_layout({64, 6}, {2}, testing::rank_range(2, 2), "R"), DType::kFP32)},
          2, 2)
          .value();
  PlacedCluster cluster = testing::make_test_cluster(2, 2, 2, 2);
  Plan plan = make_plan("refit", problem, cluster, PlanOptions{.chunk = Bytes{128}}).value();
};

void expect_refusal(const Result<void>& got, const Error& expected, const char* executor, const char* what) {
  ASSERT_FALSE(got) << executor << " accepted a plan with " << what;
  EXPECT_EQ(got.error().code, expected.code) << executor << ", " << what << ": " << got.error().message;
  EXPECT_NE(got.error().message.find(expected.message), std::string::npos)
      << executor << ", " << what << ": " << got.error().message << " (expected " << expected.message << ")";
}

template <class T>
Result<void> outcome(const Result<T>& r) {
  if (!r) return std::unexpected(r.error());
  return {};
}

TEST(BrokenPlans, EveryExecutorRefusesThemAtPrepareWithTheSameError) {
  const Relaying s;
  ASSERT_TRUE(validate_structure(s.plan));
  ASSERT_GT(s.plan.transfers.back().upstream().size(), 0u) << "the plan needs a relay";
  for (const auto& broken : broken_plans()) {
    Plan bad = s.plan;
    broken.break_it(bad);
    const auto structure = validate_structure(bad);
    ASSERT_FALSE(structure) << broken.what;
    const Error& expected = structure.error();

    SimExecutor sim(s.problem, s.cluster);
    expect_refusal(outcome(sim.prepare(bad, Rank{0}, RankBuffers{})), expected, "sim", broken.what);

    // The NCCL executor lowers the plan before anything else (LoweredPlan::make, the gate every
    // lowering passes), and builds its program from the lowered plan alone.
    expect_refusal(outcome(lowering::LoweredPlan::make(bad, Bytes{1 << 20})), expected, "nccl", broken.what);

#ifdef REFIT_TEST_UCX
    testing::RunSpec spec;
    spec.tweak = [&](std::int32_t, Plan& p, RankBuffers&) { broken.break_it(p); };
    for (const auto& o : testing::run_plan(s.problem, s.plan, spec)) {
      ASSERT_TRUE(o.error) << "ucx accepted a plan with " << broken.what;
      expect_refusal(std::unexpected(*o.error), expected, "ucx", broken.what);
    }
#endif
  }
}

}  // namespace
}  // namespace refit
