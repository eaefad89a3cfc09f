// Random small problems on random clusters: every strategy's plan must validate (every
// destination element written exactly once, every sender holding what it sends), and refit never
// moves more network bytes than direct, since per (piece, domain) refit sends at most one network
// copy while direct sends one per replica whose UNIFORM source is outside the domain.
#include <gtest/gtest.h>

#include "random_problems.h"
#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"

namespace refit {
namespace {

TEST(PlanProperty, TwoThousandRandomProblemsValidateForEveryStrategy) {
  testing::RandomProblems gen(42);
  int checked = 0;
  for (int i = 0; i < 2000; ++i) {
    const auto nodes = static_cast<std::int32_t>(gen.uniform(1, 4));
    const auto per_node = static_cast<std::int32_t>(gen.uniform(1, 4));
    const auto gpus = nodes * per_node;
    if (gpus < 2) continue;
    const auto src = static_cast<std::int32_t>(gen.uniform(1, gpus - 1));
    const auto dst = static_cast<std::int32_t>(gen.uniform(1, gpus - src));
    const auto problem = gen.problem(src, dst, gen.uniform(1, 3), 9, 0);
    const auto cluster = testing::make_test_cluster(nodes, per_node, src, dst);
    const auto strategy = strategy_names()[static_cast<std::size_t>(i) % strategy_names().size()];
    SCOPED_TRACE(::testing::Message() << "case " << i << " strategy " << strategy << " on " << nodes << "x"
                                      << per_node << ", " << src << "->" << dst);
    const auto plan = make_plan(strategy, problem, cluster);
    ASSERT_TRUE(plan) << plan.error().message;
    const auto ok = validate(*plan, problem);
    ASSERT_TRUE(ok) << ok.error().message;
    const auto refit = compute_stats(make_plan("refit", problem, cluster).value(), cluster);
    const auto direct = compute_stats(make_plan("direct", problem, cluster).value(), cluster);
    ASSERT_LE(refit.network_bytes, direct.network_bytes);
    ++checked;
  }
  EXPECT_GE(checked, 1800);
}

}  // namespace
}  // namespace refit
