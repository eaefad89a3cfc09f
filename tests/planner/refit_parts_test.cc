// The refit strategy plans one of a problem's parts where every part is a copy of it with its ranks
// shifted, and lays it out for every part (refit_parts.h, plan_copies.h). The reference is the
// strategy planning the whole problem at once (plan_refit_whole): the plans must be equal,
// transfer for transfer, ids, order, segments and `via`s included (Plan::operator==).
#include <random>
#include <string>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "model_problems.h"
#include "refit/planner/plan.h"
#include "refit/planner/plan_stats.h"
#include "refit_parts.h"
#include "strategies.h"

namespace refit::planner_detail {
namespace {

const std::string kData = REFIT_TEST_DATA_DIR;

// What make_plan hands a strategy.
struct Context {
  PlanOptions options;
  PlanContext c;
  Context(const testing::ModelProblem& mp, const PlanOptions& o)
      : options(o),
        c{.problem = mp.problem,
          .cluster = mp.cluster,
          .strategy = strategy_info(StrategyId::kRefit),
          .options = options,
          .overlaps = {}} {
    for (const auto& t : mp.problem.tensors())
      c.overlaps.push_back(overlaps(t.source, t.destination).value());
  }
};

// How many copies the part planner found (0: it plans whole), after checking that its plan is the
// whole planner's and valid.
std::size_t expect_whole_plan(const testing::ModelProblem& mp, const PlanOptions& options = {}) {
  const Context ctx(mp, options);
  const auto copies = copies_of_first_part(ctx.c, group_by_domain(ctx.c));
  const auto parted = plan_refit(ctx.c);
  const auto whole = plan_refit_whole(ctx.c);
  EXPECT_TRUE(parted.has_value() && whole.has_value());
  if (!parted || !whole) return 0;
  EXPECT_EQ(parted->transfers.size(), whole->transfers.size());
  EXPECT_TRUE(*parted == *whole);
  const auto valid = validate(*parted, mp.problem);
  EXPECT_TRUE(valid) << valid.error().message;
  return copies ? copies->shifts.size() : 0;
}

TEST(RefitParts, DeepSeekV3ReplicasArePlannedOnceIntoTheWholePlan) {
  // PP16xEP16xDP32 (two source replicas of 256 GPUs) -> 16 engines of TP32: replica k serves
  // engines 8k..8k+7, so the plan is two copies, the second's ranks 16 training ranks (one DP
  // group of EP16) and 256 inference ranks (8 engines) further.
  const auto mp = testing::model_problem("deepseek-v3", "pp=16,ep=16,dp=32", "tp=32,engines=16", "dgx-h100");
  const Context ctx(mp, {});
  const auto copies = copies_of_first_part(ctx.c, group_by_domain(ctx.c));
  ASSERT_TRUE(copies.has_value());
  ASSERT_EQ(copies->shifts.size(), 2u);
  EXPECT_EQ(copies->shifts[1].source, 16);
  EXPECT_EQ(copies->shifts[1].destination, 256);
  EXPECT_EQ(expect_whole_plan(mp), 2u);
}

TEST(RefitParts, SmallMoeReplicasOnEveryNodeSizeGiveTheWholePlan) {
  // tiny-qwen3-moe TP2xEP2 x DP{1,2,4} -> TP2 engines, nodes of 1 to 8 GPUs, and a delta refit's
  // moved bytes: whatever the parts, the plan is the whole planner's; some of these are copies.
  std::size_t copied = 0;
  for (const int dp : {2, 4, 8})
    for (const int engines : {1, 2, 4, 8})
      for (const int per_node : {1, 2, 4, 8}) {
        SCOPED_TRACE(fmt::format("dp {} engines {} gpus_per_node {}", dp, engines, per_node));
        const auto mp = testing::file_problem(
            kData + "/models/tiny-qwen3-moe.json", fmt::format("tp=2,ep=2,etp=1,dp={}", dp),
            fmt::format("tp=2,engines={}", engines), fmt::format("dgx-h100:gpus_per_node={}", per_node));
        copied += expect_whole_plan(mp) > 0;
      }
  EXPECT_GT(copied, 0u);
}

TEST(RefitParts, ReplicasThatCannotSendTheirEnginesAllInTimeArePlannedWholeAndForwardAcross) {
  // Llama-3.1-8B TP2xDP4 on one DGX H100 -> 4 engines of TP8 on 4 more: each source replica serves
  // one engine through its 2 NICs, a part of its own and a copy of the first. Alone, a replica's
  // NICs send the engine's 16.06 GB, 8.03 GB each, while each engine NIC takes in 2.01 GB: 4x the
  // time. The 8 training NICs can send one copy in the receivers' time, so the engines forward
  // what other replicas sent them: the plan is the whole planner's (the parts are not planned
  // apart), and its busiest sending NIC is within 5 % of its busiest receiving one.
  const auto mp = testing::model_problem("llama-3.1-8b", "tp=2,dp=4", "tp=8,engines=4", "dgx-h100");
  const Context ctx(mp, {});
  ASSERT_TRUE(copies_of_first_part(ctx.c, group_by_domain(ctx.c)).has_value());
  expect_whole_plan(mp);
  const auto plan = plan_refit(ctx.c).value();
  const auto stats = compute_stats(plan, mp.cluster);
  EXPECT_LE(static_cast<double>(stats.max_nic_tx.value), 1.05 * static_cast<double>(stats.max_nic_rx.value));
}

TEST(RefitParts, NoHopAcrossSendersWhereItWouldCostMoreThanItSaves) {
  // tiny-qwen3 TP4xDP2 -> 4 engines of TP4 on GB200 (8-GPU domains): each replica's NICs send
  // about 57 KB, a microsecond, more than the engines' NICs take in, but a hop across senders costs
  // a message latency (15 us) and more: the parts stay apart, planned once and copied, and no
  // network message forwards what another brought (with them joined, the refit took 1.45x).
  const auto mp = testing::file_problem(kData + "/models/tiny-qwen3.json", "tp=4,dp=2", "tp=4,engines=4",
                                        "gb200-nvl72:gpus_per_domain=8");
  EXPECT_GT(expect_whole_plan(mp), 0u);
  const Context ctx(mp, {});
  const auto plan = plan_refit(ctx.c).value();
  for (const auto& t : plan.transfers) {
    if (t.link != LinkKind::kNetwork) continue;
    for (const auto& seg : t.segments)
      if (seg.via >= 0)
        EXPECT_NE(plan.transfers[static_cast<std::size_t>(seg.via)].link, LinkKind::kNetwork)
            << "transfer " << t.id;
  }
}

TEST(RefitParts, RandomProblemsGiveTheWholePlan) {
  // Random layouts of three small models, clusters and chunks; moved bytes at random for half of
  // them (a delta refit). The parted planner's plan equals the whole planner's on every one.
  std::mt19937_64 rng(31);
  const std::vector<std::string> models{"tiny-deepseek-v3.json", "tiny-qwen3-moe.json", "tiny-llama.json"};
  std::size_t copied = 0;
  for (int i = 0; i < 40; ++i) {
    const auto& model = models[rng() % models.size()];
    const bool moe = model != "tiny-llama.json";
    const int dp = 1 << (rng() % 4);
    const std::string train = moe ? fmt::format("pp=2,ep=2,dp={}", 2 * dp) : fmt::format("tp=2,dp={}", dp);
    const std::string infer = fmt::format("tp={},engines={}", 1 << (rng() % 2 + 1), 1 << (rng() % 4));
    const std::string cluster = fmt::format("dgx-h100:gpus_per_node={}", 1 << (rng() % 4));
    SCOPED_TRACE(fmt::format("{} {} -> {} on {}", model, train, infer, cluster));
    const auto mp = testing::file_problem(kData + "/models/" + model, train, infer, cluster);
    PlanOptions options{.chunk = Bytes{std::int64_t{1} << (12 + rng() % 8)}};
    if (rng() % 2)
      for (const auto& t : mp.problem.tensors())
        options.moved_bytes.push_back(
            Bytes{t.tensor.bytes().value * static_cast<std::int64_t>(rng() % 3) / 2});
    copied += expect_whole_plan(mp, options) > 0;
  }
  EXPECT_GT(copied, 0u);
}

}  // namespace
}  // namespace refit::planner_detail
