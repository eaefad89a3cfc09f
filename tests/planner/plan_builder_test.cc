// PlanBuilder's message index against a brute-force map: segments with equal (phase, key, from,
// to) travel in one message, and a combination not seen before opens the next handle.
#include <cstdint>
#include <map>
#include <random>
#include <tuple>

#include <gtest/gtest.h>

#include "plan_builder.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::planner_detail {
namespace {

using testing::make_layout;
using testing::make_reshard;
using testing::make_test_cluster;
using testing::rank_range;

TEST(PlanBuilder, FindsEachMessageAsABruteForceMapDoes) {
  const auto problem =
      ReshardProblem::make({make_reshard("w", {64, 8}, make_layout({64, 8}, {4}, rank_range(0, 4), "S0"),
                                         make_layout({64, 8}, {4}, rank_range(4, 4), "S0"))},
                           4, 4)
          .value();
  const auto cluster = make_test_cluster(2, 4, 4, 4);
  PlanBuilder builder(problem, cluster, strategy_info(StrategyId::kRefit), Bytes{1 << 20});
  // Expected: handle = the number of distinct (phase, key, from, to) seen before this one's first
  // add; the draws repeat keys (3 x 40 x 8 x 8 small ones) and add rare large ones, thousands in
  // all, so the index grows many times over.
  std::map<std::tuple<std::uint32_t, std::uint64_t, std::int32_t, std::int32_t>, Handle> reference;
  std::mt19937_64 rng(31);
  const Box row{.offset = {0, 0}, .extent = {1, 8}};
  for (int i = 0; i < 20000; ++i) {
    const auto phase = static_cast<std::uint32_t>(rng() % 3);
    const std::uint64_t key = rng() % 8 == 0 ? rng() : rng() % 40;
    const auto from = static_cast<std::int32_t>(rng() % 8);
    const auto to = static_cast<std::int32_t>(rng() % 8);
    const auto [it, fresh] =
        reference.try_emplace({phase, key, from, to}, static_cast<Handle>(reference.size()));
    ASSERT_EQ(builder.add(phase, key, Rank{from}, Rank{to}, 0, row), it->second) << "draw " << i;
    EXPECT_EQ(builder.receiver(it->second), Rank{to});
  }
  EXPECT_GT(reference.size(), 5000u);
}

}  // namespace
}  // namespace refit::planner_detail
