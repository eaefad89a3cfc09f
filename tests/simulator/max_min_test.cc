// MaxMinSolver on its own: hand-computed allocations, and a property test against the
// definition of max-min fairness.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "refit/simulator/max_min.h"

namespace refit::sim {
namespace {

struct Problem {
  std::vector<double> capacity;
  std::vector<std::vector<std::int32_t>> flows;
  std::vector<double> weights{};  // empty: all 1
};

std::vector<double> solve(MaxMinSolver& solver, const Problem& p) {
  std::vector<std::uint32_t> begin{0};
  std::vector<std::int32_t> resources;
  for (const auto& f : p.flows) {
    resources.insert(resources.end(), f.begin(), f.end());
    begin.push_back(static_cast<std::uint32_t>(resources.size()));
  }
  const auto rates = solver.solve(p.capacity, begin, resources, p.weights);
  return {rates.begin(), rates.end()};
}

TEST(MaxMin, FlowsThroughOneResourceShareItEqually) {
  // 4 flows through a resource of 10: each gets 10 / 4.
  MaxMinSolver solver;
  const auto rates = solve(solver, {{10.0}, {{0}, {0}, {0}, {0}}});
  for (const double r : rates) EXPECT_DOUBLE_EQ(r, 2.5);
}

TEST(MaxMin, TextbookTwoBottlenecks) {
  // L1 = 1, L2 = 2; A on L1, B on L1 and L2, C on L2. L1 is the tighter (1/2 < 2/2): A = B = 0.5.
  // L2 then has 2 - 0.5 = 1.5 left for C alone: C = 1.5.
  MaxMinSolver solver;
  const auto rates = solve(solver, {{1.0, 2.0}, {{0}, {0, 1}, {1}}});
  EXPECT_DOUBLE_EQ(rates[0], 0.5);
  EXPECT_DOUBLE_EQ(rates[1], 0.5);
  EXPECT_DOUBLE_EQ(rates[2], 1.5);
  const auto bottlenecks = solver.bottlenecks();
  EXPECT_EQ(bottlenecks[0], 0);
  EXPECT_EQ(bottlenecks[1], 0);
  EXPECT_EQ(bottlenecks[2], 1);
}

TEST(MaxMin, WeightedTwoBottlenecks) {
  // The textbook case with weights A = 1, B = 3, C = 1: each flow rises at weight x level.
  // L1 fills at 1 / (1 + 3) = 0.25, L2 at 2 / (3 + 1) = 0.5: L1 first, A = 0.25, B = 0.75.
  // L2 then has 2 - 0.75 = 1.25 left for C alone: C = 1.25.
  MaxMinSolver solver;
  const auto rates = solve(solver, {{1.0, 2.0}, {{0}, {0, 1}, {1}}, {1.0, 3.0, 1.0}});
  EXPECT_DOUBLE_EQ(rates[0], 0.25);
  EXPECT_DOUBLE_EQ(rates[1], 0.75);
  EXPECT_DOUBLE_EQ(rates[2], 1.25);
  EXPECT_EQ(solver.bottlenecks()[2], 1);
}

TEST(MaxMin, FlowsWeightedByTheirBytesFinishTogether) {
  // Three flows of 1, 2 and 5 bytes through one resource of 8 bytes/s, weighted by their bytes:
  // rates 1, 2 and 5, so every one ends at 1 s, the resource's own bound (8 bytes / 8).
  MaxMinSolver solver;
  const auto rates = solve(solver, {{8.0}, {{0}, {0}, {0}}, {1.0, 2.0, 5.0}});
  EXPECT_DOUBLE_EQ(rates[0], 1.0);
  EXPECT_DOUBLE_EQ(rates[1], 2.0);
  EXPECT_DOUBLE_EQ(rates[2], 5.0);
}

TEST(MaxMin, UnconstrainedFlowIsInfinite) {
  MaxMinSolver solver;
  const auto rates = solve(solver, {{3.0}, {{}, {0}}});
  EXPECT_EQ(rates[0], std::numeric_limits<double>::infinity());
  EXPECT_EQ(solver.bottlenecks()[0], -1);
  EXPECT_DOUBLE_EQ(rates[1], 3.0);
}

TEST(MaxMin, EmptyProblem) {
  MaxMinSolver solver;
  EXPECT_TRUE(solve(solver, {{1.0}, {}}).empty());
}

// Property (Bertsekas & Gallager): a feasible allocation is max-min fair iff every flow has a
// bottleneck, a resource that is full and on which no flow is faster. Weighted, "faster" compares
// rate / weight. Checked on random problems, half of them weighted, with a solver reused across
// calls to exercise its buffers.
TEST(MaxMin, RandomProblemsSatisfyTheBottleneckCondition) {
  std::mt19937 rng(7);
  MaxMinSolver solver;
  for (int trial = 0; trial < 1000; ++trial) {
    const bool weighted = trial % 2 == 1;
    Problem p;
    const int resources = std::uniform_int_distribution<>(1, 8)(rng);
    for (int r = 0; r < resources; ++r)
      p.capacity.push_back(std::uniform_real_distribution<>(0.5, 10.0)(rng));
    const int flows = std::uniform_int_distribution<>(1, 20)(rng);
    for (int f = 0; f < flows; ++f) {
      std::vector<std::int32_t> rs;
      for (int r = 0; r < resources; ++r)
        if (std::bernoulli_distribution(0.35)(rng)) rs.push_back(r);
      if (rs.empty()) rs.push_back(std::uniform_int_distribution<>(0, resources - 1)(rng));
      p.flows.push_back(rs);
      p.weights.push_back(weighted ? std::uniform_real_distribution<>(0.1, 5.0)(rng) : 1.0);
    }
    const auto rates = solve(solver, p);
    std::vector<double> load(p.capacity.size(), 0.0), fastest(p.capacity.size(), 0.0);
    std::vector<double> level(p.flows.size());
    for (std::size_t f = 0; f < p.flows.size(); ++f) level[f] = rates[f] / p.weights[f];
    for (std::size_t f = 0; f < p.flows.size(); ++f)
      for (const auto r : p.flows[f]) {
        load[static_cast<std::size_t>(r)] += rates[f];
        fastest[static_cast<std::size_t>(r)] = std::max(fastest[static_cast<std::size_t>(r)], level[f]);
      }
    for (std::size_t r = 0; r < p.capacity.size(); ++r) EXPECT_LE(load[r], p.capacity[r] * (1 + 1e-12));
    for (std::size_t f = 0; f < p.flows.size(); ++f) {
      bool has_bottleneck = false;
      for (const auto r : p.flows[f]) {
        const auto ri = static_cast<std::size_t>(r);
        has_bottleneck |= load[ri] >= p.capacity[ri] * (1 - 1e-12) && level[f] >= fastest[ri] * (1 - 1e-12);
      }
      EXPECT_TRUE(has_bottleneck) << "trial " << trial << " flow " << f;
      EXPECT_GT(rates[f], 0.0);
    }
  }
}

}  // namespace
}  // namespace refit::sim
