// A rank's program: which chunks move in place and which are packed or unpacked (and why), where
// forwarded data outside a rank's boxes is kept, what relay chunks wait for, and refusals. Then
// the whole-plan property: every strategy's plan, lowered for every rank and run on host memory
// through the programs, leaves every destination holding exactly its elements.
#include "refit/lowering/rank_program.h"

#include <algorithm>

#include <gtest/gtest.h>

#include "host_run.h"
#include "landing_problem.h"
#include "random_problems.h"
#include "refit/lowering/explain.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::lowering {
namespace {

constexpr Bytes kStaging{1 << 20};
constexpr ZeroCopyRule kManyPuts{.max_runs = 16, .min_mean_run = Bytes{4096}};
constexpr ZeroCopyRule kOneRun{};

ReshardProblem one_tensor(Shape shape, const char* src, std::int64_t src_ranks, const char* dst,
                          std::int64_t dst_ranks) {
  const auto s = static_cast<std::int32_t>(src_ranks);
  const auto d = static_cast<std::int32_t>(dst_ranks);
  return ReshardProblem::make(
             {refit::testing::make_reshard(
                 "w", shape,
                 refit::testing::make_layout(shape, {src_ranks}, refit::testing::rank_range(0, s), src),
                 refit::testing::make_layout(shape, {dst_ranks}, refit::testing::rank_range(s, d), dst),
                 DType::kFP32)},
             s, d)
      .value();
}

// A plan and the programs of all its ranks; the plan and lowered plan live on the heap so that
// the programs' references stay valid when this is moved.
struct Programs {
  std::unique_ptr<Plan> plan;
  std::unique_ptr<LoweredPlan> lowered;
  std::vector<RankProgram> ranks;
};

Programs lower_all(const ReshardProblem& p, const PlacedCluster& c, std::string_view strategy, Bytes chunk,
                   const ZeroCopyRule& rule = kManyPuts) {
  Programs out;
  out.plan = std::make_unique<Plan>(make_plan(strategy, p, c, PlanOptions{.chunk = chunk}).value());
  out.lowered = std::make_unique<LoweredPlan>(LoweredPlan::make(*out.plan, kStaging).value());
  for (std::int32_t r = 0; r < p.world_size(); ++r)
    out.ranks.push_back(lower_rank(*out.lowered, Rank{r}, shards_of(p, Rank{r}), rule).value());
  return out;
}

// [64, 6] fp32 rows over 2 ranks to rows over 2 ranks: each destination box is one source box,
// 768 contiguous bytes, cut in 256-byte chunks: three chunks of one run each, no staging.
TEST(RankProgram, MatchingRowsMoveInPlace) {
  const auto p = lower_all(one_tensor({64, 6}, "S0", 2, "S0", 2),
                           refit::testing::make_test_cluster(1, 4, 2, 2), "direct", Bytes{256});
  const RankProgram& receiver = p.ranks[2];
  ASSERT_EQ(receiver.receives().size(), 1u);
  const Receive& r = receiver.receives()[0];
  ASSERT_EQ(r.chunks.size(), 3u);
  for (std::int64_t k = 0; k < 3; ++k) {
    EXPECT_EQ(r.chunks[static_cast<std::size_t>(k)].path, CopyPath::kInPlace);
    EXPECT_EQ(r.chunks[static_cast<std::size_t>(k)].why, CopyReason::kOneRun);
    const auto runs = receiver.runs(r, k);
    ASSERT_EQ(runs.size(), 1u);
    EXPECT_EQ(
        runs[0],
        (lowering::Run{
            .stream = 0, .kind = BufferKind::kDestination, .index = 0, .offset = 256 * k, .length = 256}));
  }
  EXPECT_EQ(receiver.receive_staging().chunks, 0);
  const RankProgram& sender = p.ranks[0];
  ASSERT_EQ(sender.sends().size(), 1u);
  for (const auto& c : sender.sends()[0].chunks) EXPECT_EQ(c.path, CopyPath::kInPlace);
  EXPECT_EQ(sender.send_staging().chunks, 0);
}

// Rows to columns of [64, 6] fp32: rank 0's piece [0:32, 0:3] is 32 runs of 12 bytes in its
// source box [0:32, 0:6] (more than 16 runs, 12 bytes on average: packed), and one contiguous
// block in the destination box [0:64, 0:3] (in place).
TEST(RankProgram, ScatteredShortRunsArePacked) {
  const auto p = lower_all(one_tensor({64, 6}, "S0", 2, "S1", 2),
                           refit::testing::make_test_cluster(1, 4, 2, 2), "direct", Bytes{1 << 20});
  const RankProgram& sender = p.ranks[0];
  ASSERT_EQ(sender.sends().size(), 2u);
  EXPECT_EQ(sender.sends()[0].chunks[0].path, CopyPath::kStaged);
  EXPECT_EQ(sender.sends()[0].chunks[0].why, CopyReason::kScattered);
  EXPECT_EQ(sender.sends()[0].chunks[0].runs, 32);
  EXPECT_EQ(sender.send_staging().chunks, 2);
  EXPECT_EQ(sender.send_staging().largest, Bytes{32 * 3 * 4});
  EXPECT_EQ(p.ranks[2].receives()[0].chunks[0].why, CopyReason::kOneRun);
}

// Columns to rows of [64, 2048] fp32: the receiver's piece [0:32, 0:1024] is 32 runs of 4 KiB in
// its box [0:32, 0:2048]. UCX puts them one by one (a page on average); NCCL, one operation per
// chunk, unpacks them from staging.
TEST(RankProgram, PageLongRunsMoveInPlaceUnlessTheRuleWantsOneRun) {
  const auto problem = one_tensor({64, 2048}, "S1", 2, "S0", 2);
  const auto cluster = refit::testing::make_test_cluster(1, 4, 2, 2);
  const auto ucx = lower_all(problem, cluster, "direct", Bytes{1 << 20}, kManyPuts);
  const Receive& r = ucx.ranks[2].receives()[0];
  EXPECT_EQ(r.chunks[0].path, CopyPath::kInPlace);
  EXPECT_EQ(r.chunks[0].why, CopyReason::kLongRuns);
  const auto runs = ucx.ranks[2].runs(r, 0);
  ASSERT_EQ(runs.size(), 32u);
  EXPECT_EQ(runs[1].offset - runs[0].offset, 2048 * 4);
  EXPECT_EQ(runs[0].length, 1024 * 4);
  const auto nccl = lower_all(problem, cluster, "direct", Bytes{1 << 20}, kOneRun);
  EXPECT_EQ(nccl.ranks[2].receives()[0].chunks[0].path, CopyPath::kStaged);
  EXPECT_EQ(nccl.ranks[2].receives()[0].chunks[0].why, CopyReason::kScattered);
}

// gather-broadcast: inference ranks forward whole tensors around the ring although they keep only
// their slice, so what they forward lands in scratch, back to back, and their slice is copied out.
TEST(RankProgram, ForwardedDataOutsideTheDestinationBoxLandsInScratch) {
  const auto p = lower_all(one_tensor({64, 6}, "S0", 2, "S0", 3),
                           refit::testing::make_test_cluster(1, 5, 2, 3), "gather-broadcast", Bytes{256});
  std::int32_t kept = 0;
  std::int32_t copied_out = 0;
  for (const auto& program : p.ranks)
    for (const auto& r : program.receives())
      for (const auto& l : r.segments)
        if (l.in_place && l.in_place->kind == BufferKind::kScratch) {
          ++kept;
          copied_out += l.partial.empty() ? 0 : 1;
          EXPECT_GT(program.scratch(), Bytes{0});
        }
  EXPECT_GT(kept, 0);
  EXPECT_GT(copied_out, 0);
}

// refit on 2 nodes of 2: each piece ([32, 6] fp32, 768 bytes) lands once on node 1 and is
// relayed to the other inference rank. A relay over 4 chunks is cut into row slabs that land one
// after another (PlanBuilder's relay slices), each forwarding rows [a, b) of its upstream's one box
// of 24-byte rows, so its chunk c (its bytes up to e = min(128 (c + 1), its bytes)) waits for the
// upstream chunks through byte 24 a + e: ceil((24 a + e) / 128) of them.
TEST(RankProgram, RelayChunksWaitOnlyForTheBytesTheyCarry) {
  const auto p = lower_all(one_tensor({64, 6}, "S0", 2, "R", 2),
                           refit::testing::make_test_cluster(2, 2, 2, 2), "refit", Bytes{128});
  std::int32_t relays = 0;
  for (std::int32_t r : {2, 3})
    for (const auto& s : p.ranks[static_cast<std::size_t>(r)].sends()) {
      ++relays;
      const auto& t = p.plan->transfers[static_cast<std::size_t>(s.transfer)];
      ASSERT_EQ(t.segments.size(), 1u);
      const auto& up = p.plan->transfers[static_cast<std::size_t>(t.segments[0].via)];
      ASSERT_EQ(up.segments.size(), 1u);
      const std::int64_t before = (t.segments[0].box.offset[0] - up.segments[0].box.offset[0]) * 24;
      for (std::size_t c = 0; c < s.waits.size(); ++c) {
        const std::int64_t end =
            std::min<std::int64_t>(128 * (static_cast<std::int64_t>(c) + 1), t.bytes.value);
        ASSERT_EQ(s.waits[c].size(), 1u);
        EXPECT_EQ(s.waits[c][0].chunks, (before + end + 127) / 128);
      }
    }
  EXPECT_GT(relays, 2);  // two pieces, at least one of them cut
}

TEST(RankProgram, RefusesASenderWithoutTheDataItSends) {
  const auto problem = one_tensor({64, 6}, "S0", 2, "S0", 2);
  const auto plan = make_plan("direct", problem, refit::testing::make_test_cluster(1, 4, 2, 2)).value();
  const auto lowered = LoweredPlan::make(plan, kStaging).value();
  const auto r = lower_rank(lowered, Rank{0}, RankShards{}, kManyPuts);
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kMismatch);
  EXPECT_NE(r.error().message.find("tensor 'w'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("no source shard"), std::string::npos) << r.error().message;
}

TEST(RankProgram, RefusesShardsThatDoNotFitThePlan) {
  const auto problem = one_tensor({64, 6}, "S0", 2, "S0", 2);
  const auto plan = make_plan("direct", problem, refit::testing::make_test_cluster(1, 4, 2, 2)).value();
  const auto lowered = LoweredPlan::make(plan, kStaging).value();
  const auto refused = [&](RankShards shards, const char* says) {
    const auto r = lower_rank(lowered, Rank{2}, std::move(shards), kManyPuts);
    ASSERT_FALSE(r);
    EXPECT_EQ(r.error().code, ErrorCode::kMismatch);
    EXPECT_NE(r.error().message.find(says), std::string::npos) << r.error().message;
  };
  refused(RankShards{.destinations = {Shard{.tensor = 3, .box = Box{{0, 0}, {32, 6}}}}},
          "tensor 3 is not in the plan");
  refused(RankShards{.destinations = {Shard{.tensor = 0, .box = Box{{40, 0}, {32, 6}}}}},
          "not inside tensor 'w'");
  refused(RankShards{.destinations = {Shard{.tensor = 0, .box = Box{{0, 0}, {32, 6}}},
                                      Shard{.tensor = 0, .box = Box{{0, 0}, {32, 6}}}}},
          "destinations[1]: a second destinations shard");
  EXPECT_EQ(lower_rank(lowered, Rank{4}, RankShards{}, kManyPuts).error().code, ErrorCode::kOutOfRange);
}

// The chunk rule from the staging: below 2 x 16 bytes nothing fits; 100 bytes cut chunks of 48.
// The weight "w" in rows of 200 on training ranks 0, 1 (cutting block row 1) into three engines
// of two ranks splitting it by columns, quantized at landing: engine 0 (ranks 2, 3) gets the
// bf16, quantizes, and sends fp8 on.
ReshardProblem landing_problem() { return refit::testing::landing_test_problem(3, 2); }

TEST(RankProgram, ALandingRankQuantizesOnceItsCopyHasLandedAndSendsFromItsOwnBoxes) {
  const auto problem = landing_problem();
  const auto p = lower_all(problem, refit::testing::make_test_cluster(4, 2, 2, 6), "refit", Bytes{1 << 20});
  const RankProgram& landing = p.ranks[2];
  ASSERT_EQ(landing.quantize_steps().size(), 1u);
  const QuantizeStep& step = landing.quantize_steps()[0];
  // Rank 2 holds columns 0..255: blocks [0:256, 0:256], whose 2x2 scales it makes; tensors are
  // values 0, scales 1, the landing copy 2, and its buffers follow the problem's order.
  ASSERT_EQ(step.blocks.size(), 1u);
  EXPECT_EQ(step.blocks[0].blocks, (Box{{0, 0}, {256, 256}}));
  EXPECT_EQ(step.blocks[0].scale_box, (Box{{0, 0}, {2, 2}}));
  EXPECT_EQ(step.blocks[0].values, 0);
  EXPECT_EQ(step.blocks[0].scales, 1);
  EXPECT_EQ(step.blocks[0].copy, 2);
  // It waits for all of every transfer that brought its copy: one from each training rank.
  ASSERT_EQ(step.waits.size(), 2u);
  for (const auto& w : step.waits) {
    EXPECT_EQ(p.plan->transfers[static_cast<std::size_t>(w.transfer)].receiver, Rank{2});
    EXPECT_EQ(w.chunks, p.lowered->layout(w.transfer).chunks());
  }
  // Neither a receive nor a send; what rank 2 sends on reads its own fp8 in place.
  EXPECT_TRUE(std::ranges::none_of(landing.receives(),
                                   [&](const Receive& r) { return r.transfer == step.transfer; }));
  ASSERT_FALSE(landing.sends().empty());
  for (const Send& s : landing.sends())
    for (const auto& c : s.chunks) EXPECT_EQ(c.path, CopyPath::kInPlace);
  EXPECT_NE(explain(landing, execution_model(ExecutionModelId::kRefitUcx))
                .find("quantize  1 steps make 65536 fp8 values"),
            std::string::npos);
  // Without its copy's buffer the step has nothing to quantize: refused, naming the tensor.
  auto shards = shards_of(problem, Rank{2});
  std::erase_if(shards.destinations, [](const Shard& s) { return s.tensor == 2; });
  const auto refused = lower_rank(*p.lowered, Rank{2}, std::move(shards), kManyPuts);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("tensor 'w@landing' does not hold [0:256, 0:256]"),
            std::string::npos)
      << refused.error().message;
}

TEST(RankProgram, LandingPlansOfEverySendingStrategyRunToTheRightBytes) {
  const auto problem = landing_problem();
  const auto cluster = refit::testing::make_test_cluster(4, 2, 2, 6);
  for (const auto& info : strategies()) {
    if (!info.sends_from_holders) continue;
    SCOPED_TRACE(info.name);
    const auto plan = make_plan(info, problem, cluster, PlanOptions{.chunk = Bytes{40000}}).value();
    const auto ran = testing::run_on_host(plan, problem, kStaging, kManyPuts);
    EXPECT_TRUE(ran) << ran.error().message;
  }
}

TEST(LoweredPlan, StagingSetsTheChunks) {
  const auto problem = one_tensor({64, 6}, "S1", 2, "S0", 2);
  const auto plan = make_plan("direct", problem, refit::testing::make_test_cluster(1, 4, 2, 2)).value();
  const auto small = LoweredPlan::make(plan, Bytes{31});
  ASSERT_FALSE(small);
  EXPECT_EQ(small.error().code, ErrorCode::kOutOfRange);
  const auto lowered = LoweredPlan::make(plan, Bytes{100}).value();
  EXPECT_EQ(lowered.layout(0).chunk_bytes(0), 48);
  EXPECT_TRUE(lowering::testing::run_on_host(plan, problem, Bytes{100}, kOneRun).has_value());
}

TEST(Explain, SaysWhatWasChosenAndWhy) {
  const auto p = lower_all(one_tensor({64, 6}, "S0", 2, "S1", 2),
                           refit::testing::make_test_cluster(1, 4, 2, 2), "direct", Bytes{1 << 20});
  const auto s = summarize(p.ranks[0]);
  EXPECT_EQ(s.sends.transfers, 2);
  EXPECT_EQ(s.sends.staged, 2);
  EXPECT_EQ(s.sends.by_reason[static_cast<std::size_t>(CopyReason::kScattered)], 2);
  const auto text = explain(p.ranks[0], execution_model(ExecutionModelId::kRefitUcx));
  EXPECT_NE(text.find("rank 0 as refit-ucx"), std::string::npos) << text;
  EXPECT_NE(text.find("too many short runs: packed"), std::string::npos) << text;
}

class EveryStrategy : public ::testing::TestWithParam<std::string_view> {};

// Random problems (uneven, empty, replicated and strided boxes, every dtype) on a cluster of
// 2-GPU domains, small chunks so that messages are cut mid-row: under both zero-copy rules every
// destination ends up holding exactly its elements.
TEST_P(EveryStrategy, RandomPlansRunToTheRightBytesOnHostMemory) {
  refit::testing::RandomProblems random(11);
  for (int i = 0; i < 40; ++i) {
    const auto src = static_cast<std::int32_t>(random.uniform(1, 4));
    const auto dst = static_cast<std::int32_t>(random.uniform(1, 4));
    const auto problem = random.problem(src, dst);
    const auto cluster = refit::testing::make_test_cluster((src + dst + 1) / 2, 2, src, dst);
    const auto plan = make_plan(GetParam(), problem, cluster, PlanOptions{.chunk = Bytes{40}}).value();
    for (const auto& rule : {kManyPuts, kOneRun}) {
      const auto ran = lowering::testing::run_on_host(plan, problem, Bytes{96}, rule);
      ASSERT_TRUE(ran) << "problem " << i << ": " << ran.error().message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Lowering, EveryStrategy, ::testing::ValuesIn(strategy_names()),
                         [](const auto& info) {
                           std::string name(info.param);
                           std::ranges::replace(name, '-', '_');
                           return name;
                         });

}  // namespace
}  // namespace refit::lowering
