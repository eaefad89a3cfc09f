// Member plans and joins run byte for byte through the lowering on host memory (host_run.h):
// after a member plan every member's destination shards hold the verification pattern; after a
// join from peers only, so do the joining engine's, though only the peers sent (in the join's
// problem the peers' source shards are their destination shards, filled as live engines hold the
// current weights).
#include <gtest/gtest.h>

#include "engine_problems.h"
#include "host_run.h"
#include "refit/planner/membership.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"

namespace refit {
namespace {

constexpr ZeroCopyRule kManyPuts{.max_runs = 16, .min_mean_run = Bytes{4096}};

TEST(MembershipRun, MemberPlansAndPeerJoinsDeliverEveryByte) {
  testing::RandomProblems gen(35);
  for (int i = 0; i < 60; ++i) {
    const auto [engines, sources, problem, cluster] = testing::random_engine_case(gen);
    MemberEngines m{.engines = engines, .members = {}};
    for (std::int32_t e = 0; e < engines; ++e)
      if (e % 2 == i % 2) m.members.push_back(e);
    SCOPED_TRACE(::testing::Message() << "case " << i << ": " << m.members.size() << " of " << engines);
    const auto strategy = i % 3 == 0 ? "direct" : "refit";
    const auto full = make_plan(strategy, problem, cluster, PlanOptions{.chunk = Bytes{40}}).value();
    const auto derived = member_plan(full, problem, cluster, m).value();
    const auto ran = lowering::testing::run_on_host(derived.plan, members_problem(problem, m).value(),
                                                    Bytes{96}, kManyPuts);
    ASSERT_TRUE(ran) << ran.error().message;

    std::vector<std::int32_t> peers;
    for (std::int32_t e = 1; e < engines; ++e) peers.push_back(e);
    const auto joined =
        join_problem(problem, cluster,
                     {.engines = engines, .joining = 0, .peers = peers, .source = JoinSource::kPeers})
            .value();
    const auto plan =
        make_plan("refit", joined.problem, joined.cluster, PlanOptions{.chunk = Bytes{40}}).value();
    const auto filled = lowering::testing::run_on_host(plan, joined.problem, Bytes{96}, kManyPuts);
    ASSERT_TRUE(filled) << filled.error().message;
  }
}

}  // namespace
}  // namespace refit
