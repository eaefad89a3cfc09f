#pragma once
// Random elastic-refit cases for the bookkeeping tests: problems of 2 training ranks and 3
// engines of 2 inference ranks, each planned by every strategy, with one rank gone.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "random_problems.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"

namespace refit::testing {

using OneRankGone = std::function<void(const ReshardProblem&, const Plan&, const std::vector<bool>& gone)>;

// `rounds` problems drawn from `seed`; the rank gone is drawn from [first_gone, 8) per plan.
inline void for_each_one_rank_gone(unsigned seed, int rounds, int first_gone, const OneRankGone& body) {
  RandomProblems gen(seed);
  std::mt19937 rng(seed);
  for (int round = 0; round < rounds; ++round) {
    const auto problem = gen.problem(2, 6, 3, 40);
    const auto cluster = make_test_cluster(2, 6, 2, 6);
    for (const auto name : strategy_names()) {
      SCOPED_TRACE(::testing::Message() << "round " << round << ", " << name);
      const auto plan = make_plan(name, problem, cluster, PlanOptions{.chunk = Bytes{64}});
      ASSERT_TRUE(plan) << plan.error().message;
      std::vector<bool> gone(8, false);
      gone[static_cast<std::size_t>(std::uniform_int_distribution<int>(first_gone, 7)(rng))] = true;
      body(problem, *plan, gone);
    }
  }
}

}  // namespace refit::testing
