// IncrementalMaxMin against a from-scratch MaxMinSolver: random flows come and go in batches,
// and after every update the exact mode matches the solver and reports exactly the flows whose
// rate changed, while a rate tolerance keeps the invariants it documents.
#include "incremental_max_min.h"

#include <algorithm>
#include <random>
#include <set>

#include <gtest/gtest.h>

#include "refit/simulator/max_min.h"

namespace refit::sim {
namespace {

// A stream of its own for each task (the solver ignores their order), weighted 1/2, 1 or 3, so
// that hand-overs between tasks of one weight still happen.
std::int32_t weighted_stream(Model& m, std::mt19937& rng) {
  constexpr double kWeights[] = {0.5, 1.0, 3.0};
  return m.add_stream(kWeights[std::uniform_int_distribution<>(0, 2)(rng)]);
}

// Few resources, small integer capacities: many ties between levels.
Model random_flows(std::mt19937& rng, bool weighted = false) {
  Model m;
  const int resources = std::uniform_int_distribution<>(1, 8)(rng);
  for (int r = 0; r < resources; ++r)
    m.add_resource("r", BytesPerSecond{std::uniform_int_distribution<>(1, 4)(rng) * 1e9});
  for (int t = 0; t < 60; ++t) {
    TaskSpec s{.bytes = Bytes{1}, .stream = weighted ? weighted_stream(m, rng) : -1};
    const int crossed = std::uniform_int_distribution<>(1, std::min(3, resources))(rng);
    for (int k = 0; k < crossed; ++k)
      s.resources.push_back(ResourceId{std::uniform_int_distribution<>(0, resources - 1)(rng)});
    m.add_task(s);
  }
  return m;
}

// Senders' NICs to receivers' NICs, all of one speed: the shape of a plan's network traffic.
Model random_all_to_all(std::mt19937& rng, bool weighted = false) {
  Model m;
  const int nics = std::uniform_int_distribution<>(2, 12)(rng);
  for (int r = 0; r < 2 * nics; ++r) m.add_resource("nic", BytesPerSecond{50e9});
  std::uniform_int_distribution<> nic(0, nics - 1);
  for (int t = 0; t < 200; ++t)
    m.add_task({.bytes = Bytes{1},
                .resources = {ResourceId{nic(rng)}, ResourceId{nics + nic(rng)}},
                .stream = weighted ? weighted_stream(m, rng) : -1});
  return m;
}

std::vector<double> solve_from_scratch(const Model& m, const std::vector<std::int32_t>& flows) {
  std::vector<double> capacity;
  for (std::int32_t r = 0; r < m.resource_count(); ++r) capacity.push_back(m.capacity(ResourceId{r}).value);
  std::vector<std::uint32_t> begin{0};
  std::vector<std::int32_t> resources;
  std::vector<double> weights;
  for (const std::int32_t f : flows) {
    for (const ResourceId r : m.resources(TaskId{f})) resources.push_back(r.value);
    begin.push_back(static_cast<std::uint32_t>(resources.size()));
    weights.push_back(m.share_weight(TaskId{f}));
  }
  MaxMinSolver solver;
  const auto rates = solver.solve(capacity, begin, resources, weights);
  return {rates.begin(), rates.end()};
}

// Flows start and end in random batches of 1 to 3 between updates; now and then, before a batch,
// a flow hands over to an idle one crossing the same resources (a stream's next message).
class Churn {
 public:
  Churn(const Model& m, double tolerance, unsigned seed) : model_(m), rates_(m, tolerance), rng_(seed) {
    for (std::int32_t t = 0; t < m.task_count(); ++t) idle_.insert(t);
  }
  // Returns the flows update() reported as changed.
  std::set<std::int32_t> step() {
    handed_over_.clear();
    if (!active_.empty() && std::bernoulli_distribution(0.3)(rng_)) hand_over();
    for (int ops = std::uniform_int_distribution<>(1, 3)(rng_); ops > 0; --ops) {
      const bool add = active_.empty() || (!idle_.empty() && std::bernoulli_distribution(0.55)(rng_));
      auto& from = add ? idle_ : active_;
      std::uniform_int_distribution<std::size_t> pick(0, from.size() - 1);
      const auto it = std::next(from.begin(), static_cast<std::ptrdiff_t>(pick(rng_)));
      const std::int32_t flow = *it;
      from.erase(it);
      if (add) {
        active_.insert(flow);
        rates_.add(flow);
      } else {
        idle_.insert(flow);
        rates_.remove(flow);
      }
    }
    const auto changed = rates_.update();
    return {changed.begin(), changed.end()};
  }
  std::vector<std::int32_t> active() const { return {active_.begin(), active_.end()}; }
  double rate(std::int32_t flow) const { return rates_.rate(flow); }
  // (from, to) of this step's hand-over, if any.
  const std::vector<std::pair<std::int32_t, std::int32_t>>& handed_over() const { return handed_over_; }

 private:
  void hand_over() {
    std::uniform_int_distribution<std::size_t> pick(0, active_.size() - 1);
    const std::int32_t from = *std::next(active_.begin(), static_cast<std::ptrdiff_t>(pick(rng_)));
    const auto same = std::ranges::find_if(idle_, [&](std::int32_t t) {
      return std::ranges::equal(model_.resources(TaskId{t}), model_.resources(TaskId{from})) &&
             model_.share_weight(TaskId{t}) == model_.share_weight(TaskId{from});
    });
    if (same == idle_.end()) return;
    const std::int32_t to = *same;
    rates_.hand_over(from, to);
    active_.erase(from);
    idle_.insert(from);
    idle_.erase(to);
    active_.insert(to);
    handed_over_.emplace_back(from, to);
  }

  const Model& model_;
  std::vector<std::pair<std::int32_t, std::int32_t>> handed_over_;
  IncrementalMaxMin rates_;
  std::mt19937 rng_;
  std::set<std::int32_t> idle_, active_;
};

void check_exact(const Model& m, unsigned seed) {
  Churn churn(m, 0.0, seed);
  std::vector<double> before(static_cast<std::size_t>(m.task_count()), -1.0);
  for (int step = 0; step < 150; ++step) {
    const auto changed = churn.step();
    // A flow handed over keeps its rate under its new task unless the update changed it.
    for (const auto& [from, to] : churn.handed_over())
      before[static_cast<std::size_t>(to)] = before[static_cast<std::size_t>(from)];
    const auto flows = churn.active();
    const auto want = solve_from_scratch(m, flows);
    for (std::size_t i = 0; i < flows.size(); ++i) {
      const double got = churn.rate(flows[i]);
      SCOPED_TRACE(testing::Message() << "step " << step << " flow " << flows[i]);
      EXPECT_NEAR(got, want[i], 1e-8 * want[i]);
      auto& old = before[static_cast<std::size_t>(flows[i])];
      if (!changed.contains(flows[i])) EXPECT_EQ(got, old);  // bit for bit
      old = got;
    }
    for (const std::int32_t f : changed) EXPECT_TRUE(std::binary_search(flows.begin(), flows.end(), f));
  }
}

TEST(IncrementalMaxMin, MatchesFromScratchSolutionsAsFlowsComeAndGo) {
  std::mt19937 rng(11);
  for (unsigned i = 0; i < 100; ++i) check_exact(random_flows(rng), i);
}

TEST(IncrementalMaxMin, MatchesFromScratchSolutionsOnAllToAlls) {
  std::mt19937 rng(12);
  for (unsigned i = 0; i < 50; ++i) check_exact(random_all_to_all(rng), i);
}

// Weighted: the same replay compares levels (rate / weight) and sums loads.
TEST(IncrementalMaxMin, MatchesFromScratchWeightedSolutions) {
  std::mt19937 rng(14);
  for (unsigned i = 0; i < 100; ++i) {
    check_exact(random_flows(rng, true), i);
    check_exact(random_all_to_all(rng, true), i);
  }
}

// With tolerance t: no resource over capacity, and every flow has a resource that is full to
// within a factor (1 + t)^2 on which no flow is more than (1 + t)^2 times faster (weighted:
// compared as rate / weight). (A flow kept
// up to t below its share may stay there while a tolerance-delayed change lifts the share by
// another t; tighter than max-min fair to within t, what random churn shows is this.)
void check_tolerance_invariants(const Model& m, double t, unsigned seed) {
  constexpr double kRounding = 1e-9;
  const double slack = (1 + t) * (1 + t);
  Churn churn(m, t, seed);
  for (int step = 0; step < 150; ++step) {
    churn.step();
    const auto flows = churn.active();
    std::vector<double> load(static_cast<std::size_t>(m.resource_count())), fastest(load.size());
    for (const std::int32_t f : flows)
      for (const ResourceId r : m.resources(TaskId{f})) {
        const auto i = static_cast<std::size_t>(r.value);
        load[i] += churn.rate(f);
        fastest[i] = std::max(fastest[i], churn.rate(f) / m.share_weight(TaskId{f}));
      }
    for (std::int32_t r = 0; r < m.resource_count(); ++r) {
      const double capacity = m.capacity(ResourceId{r}).value;
      EXPECT_LE(load[static_cast<std::size_t>(r)], capacity * (1 + kRounding));
    }
    for (const std::int32_t f : flows) {
      const auto crossed = m.resources(TaskId{f});
      EXPECT_TRUE(std::any_of(crossed.begin(), crossed.end(),
                              [&](ResourceId r) {
                                const auto i = static_cast<std::size_t>(r.value);
                                return load[i] >= m.capacity(r).value / slack * (1 - kRounding) &&
                                       churn.rate(f) / m.share_weight(TaskId{f}) >=
                                           fastest[i] / slack * (1 - kRounding);
                              }))
          << "step " << step << " flow " << f << " has no bottleneck";
    }
  }
}

TEST(IncrementalMaxMin, ToleranceNeverOversubscribesAndKeepsEveryFlowNearItsShare) {
  std::mt19937 rng(13);
  for (unsigned i = 0; i < 100; ++i)
    for (const double t : {1e-2, 0.1}) {
      check_tolerance_invariants(random_flows(rng), t, i);
      check_tolerance_invariants(random_all_to_all(rng), t, i);
      check_tolerance_invariants(random_flows(rng, true), t, i);
    }
}

}  // namespace
}  // namespace refit::sim
