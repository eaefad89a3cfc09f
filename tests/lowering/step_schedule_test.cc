// The step schedule of a step-paced executor (refit's NCCL executor): checked against a brute-force
// first fit that recounts every rank's staging and chunks per step from all chunks placed so far,
// and against the rules the executor relies on (every chunk in one step, staging and chunk count
// per rank and step within bounds, a forwarded element sent only in a step after the one that
// delivered it, a transfer's chunks in order).
#include "refit/lowering/step_schedule.h"

#include <algorithm>
#include <map>

#include <gtest/gtest.h>

#include "forwarding_plans.h"
#include "landing_problem.h"
#include "random_problems.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"

namespace refit::lowering {
namespace {

struct Placed {
  Rank a, b;
  std::int32_t step;
  std::int64_t bytes;
};

// First fit by brute force: chunk k of transfer t goes in the first step at or after both its
// transfer's previous chunk and one past every chunk it waits for (any of them, not only the last
// of each wait), where neither rank's chunks of that step, with it, exceed `half` bytes (each
// rounded up to kAlign) or `chunks_per_step` chunks.
StepSchedule reference(const LoweredPlan& lowered, std::int32_t chunks_per_step) {
  const Plan& plan = lowered.plan();
  StepSchedule s;
  s.half = lowered.staging().value / 2 / kAlign * kAlign;
  std::vector<Placed> placed;
  const auto fits = [&](Rank r, std::int32_t step, std::int64_t bytes) {
    std::int64_t used = bytes, count = 1;
    for (const auto& p : placed)
      if (p.step == step && (p.a == r || p.b == r)) used += p.bytes, ++count;
    return used <= s.half && count <= chunks_per_step;
  };
  for (const auto& t : plan.transfers) {
    auto& steps = s.step.emplace_back();
    auto& upstream = s.upstream.emplace_back();
    for (std::int64_t k = 0; k < lowered.layout(t.id).chunks(); ++k) {
      std::int32_t latest = kNoUpstream;
      const auto waits = lowered.waits(t.id, k).value();
      for (const auto& w : waits)
        for (std::int64_t j = 0; j < w.chunks; ++j)
          latest =
              std::max(latest, s.step[static_cast<std::size_t>(w.transfer)][static_cast<std::size_t>(j)]);
      std::int32_t step = std::max(latest + 1, k ? steps.back() : 0);
      const std::int64_t bytes = align_up(lowered.layout(t.id).chunk_bytes(k));
      if (!t.quantizes()) {
        while (!fits(t.sender, step, bytes) || !fits(t.receiver, step, bytes)) ++step;
        placed.push_back({t.sender, t.receiver, step, bytes});
      }
      steps.push_back(step);
      upstream.push_back(latest);
      s.steps = std::max(s.steps, step + 1);
    }
  }
  return s;
}

// The rules the NCCL executor's translation relies on, checked chunk by chunk.
void expect_rules(const LoweredPlan& lowered, const StepSchedule& s, std::int32_t chunks_per_step) {
  const Plan& plan = lowered.plan();
  ASSERT_EQ(s.step.size(), plan.transfers.size());
  std::map<std::pair<std::int32_t, std::int32_t>, std::pair<std::int64_t, std::int64_t>> per_rank_step;
  for (const auto& t : plan.transfers) {
    const auto& steps = s.step[static_cast<std::size_t>(t.id)];
    ASSERT_EQ(static_cast<std::int64_t>(steps.size()), lowered.layout(t.id).chunks()) << "transfer " << t.id;
    for (std::size_t k = 0; k < steps.size(); ++k) {
      ASSERT_GE(steps[k], 0);
      ASSERT_LT(steps[k], s.steps);
      if (k > 0) EXPECT_GE(steps[k], steps[k - 1]) << "transfer " << t.id << " chunk " << k;
      const auto waits = lowered.waits(t.id, static_cast<std::int64_t>(k)).value();
      for (const auto& w : waits)
        for (std::int64_t j = 0; j < w.chunks; ++j)
          EXPECT_GT(steps[k], s.step[static_cast<std::size_t>(w.transfer)][static_cast<std::size_t>(j)])
              << "transfer " << t.id << " chunk " << k << " forwards from transfer " << w.transfer;
      if (t.quantizes()) continue;
      const std::int64_t bytes = align_up(lowered.layout(t.id).chunk_bytes(static_cast<std::int64_t>(k)));
      for (const Rank r : {t.sender, t.receiver}) {
        auto& [used, count] = per_rank_step[{r.value, steps[k]}];
        used += bytes;
        ++count;
      }
    }
  }
  for (const auto& [at, use] : per_rank_step) {
    EXPECT_LE(use.first, s.half) << "rank " << at.first << " step " << at.second;
    EXPECT_LE(use.second, chunks_per_step) << "rank " << at.first << " step " << at.second;
  }
}

TEST(StepSchedule, IsTheBruteForceFirstFitAndKeepsTheExecutorsRules) {
  refit::testing::RandomProblems random(23);
  std::int64_t chunks = 0, steps = 0;
  for (const auto* strategy : {"refit", "direct", "gather-broadcast"})
    for (int i = 0; i < 12; ++i) {
      const auto plan = testing::forwarding_plan(random, strategy);
      const Bytes staging{2 * kAlign * random.uniform(2, 8)};
      const auto lowered = LoweredPlan::make(plan, staging).value();
      for (const std::int32_t per_step : {1, 3, 256}) {
        const auto s = make_step_schedule(lowered, per_step).value();
        const auto want = reference(lowered, per_step);
        EXPECT_EQ(s.step, want.step) << strategy << " problem " << i << " per step " << per_step;
        EXPECT_EQ(s.upstream, want.upstream);
        EXPECT_EQ(s.steps, want.steps);
        EXPECT_EQ(s.half, want.half);
        expect_rules(lowered, s, per_step);
        chunks += lowered.chunks();
        steps += s.steps;
      }
    }
  // The problems are not trivial: many chunks, over many steps.
  EXPECT_GT(chunks, 1000);
  EXPECT_GT(steps, 300);
}

// Quantize steps (FP8 made at the landing ranks) take no staging and go in the step after all
// they quantize; what forwards their output goes later still.
TEST(StepSchedule, QuantizeStepsFollowAllTheyQuantize) {
  const auto problem = refit::testing::landing_test_problem(2, 2);
  const auto cluster = refit::testing::make_test_cluster(3, 2, 2, 4);
  const auto plan = make_plan("refit", problem, cluster, PlanOptions{.chunk = Bytes{4096}}).value();
  ASSERT_TRUE(std::ranges::any_of(plan.transfers, &Transfer::quantizes));
  const auto lowered = LoweredPlan::make(plan, Bytes{16384}).value();
  const auto s = make_step_schedule(lowered, 4).value();
  const auto want = reference(lowered, 4);
  EXPECT_EQ(s.step, want.step);
  EXPECT_EQ(s.upstream, want.upstream);
  expect_rules(lowered, s, 4);
}

// One transfer of 64 bytes from rank 0 to rank 1, in chunks of 16 bytes (the plan's chunk), staging
// 64 bytes: half is 32 bytes, two chunks per step, so chunks 0, 1 go in step 0 and 2, 3 in step 1;
// with one chunk per step, one chunk a step: steps 0, 1, 2, 3.
TEST(StepSchedule, HalfTheStagingAndTheChunkLimitBoundAStep) {
  const Plan plan{.strategy = "direct",
                  .tensors = {TensorSpec{.name = "t", .shape = {16}, .dtype = DType::kFP32}},
                  .source_ranks = 1,
                  .destination_ranks = 1,
                  .transfers = {Transfer{.id = 0,
                                         .sender = Rank{0},
                                         .receiver = Rank{1},
                                         .link = LinkKind::kNetwork,
                                         .segments = {Segment{.tensor = 0, .box = Box{{0}, {16}}}},
                                         .bytes = Bytes{64},
                                         .chunk = Bytes{16}}}};
  ASSERT_TRUE(validate_structure(plan));
  const auto lowered = LoweredPlan::make(plan, Bytes{64}).value();
  const auto two = make_step_schedule(lowered, 256).value();
  EXPECT_EQ(two.half, 32);
  EXPECT_EQ(two.step, (std::vector<std::vector<std::int32_t>>{{0, 0, 1, 1}}));
  EXPECT_EQ(two.steps, 2);
  const auto one = make_step_schedule(lowered, 1).value();
  EXPECT_EQ(one.step, (std::vector<std::vector<std::int32_t>>{{0, 1, 2, 3}}));
  EXPECT_EQ(one.upstream,
            (std::vector<std::vector<std::int32_t>>{{kNoUpstream, kNoUpstream, kNoUpstream, kNoUpstream}}));
}

TEST(StepSchedule, RefusesNoChunksPerStep) {
  const Plan plan{.strategy = "direct", .source_ranks = 1, .destination_ranks = 1};
  const auto lowered = LoweredPlan::make(plan, kDefaultStaging).value();
  const auto refused = make_step_schedule(lowered, 0);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("chunks per step must be at least 1, got 0"), std::string::npos);
}

}  // namespace
}  // namespace refit::lowering
