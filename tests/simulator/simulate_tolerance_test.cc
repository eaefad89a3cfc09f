// simulate() with SimulateOptions::rate_tolerance against the exact engine: on random models
// and on all-to-alls shaped like a plan's network traffic, the makespan and every task's end
// stay within the tolerance (of the makespan), and no resource carries more than its capacity.
#include <algorithm>
#include <cmath>
#include <random>

#include <gtest/gtest.h>

#include "refit/simulator/simulate.h"

namespace refit::sim {
namespace {

constexpr double kTolerance = 1e-2;

SimulationResult run(const Model& m, double rate_tolerance) {
  SimulateOptions options;
  options.rate_tolerance = rate_tolerance;
  auto r = simulate(m, options);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return std::move(*r);
}

// Never over capacity: every resource's bytes fit in the time it was busy.
void expect_within_capacity(const Model& m, const SimulationResult& r) {
  for (std::int32_t i = 0; i < m.resource_count(); ++i) {
    const auto& u = r.resources[static_cast<std::size_t>(i)];
    EXPECT_LE(static_cast<double>(u.bytes.value), m.capacity(ResourceId{i}).value * u.busy.value * (1 + 1e-9))
        << "resource " << i;
  }
}

void expect_close_to_exact(const Model& m) {
  const SimulationResult exact = run(m, 0.0);
  const SimulationResult fast = run(m, kTolerance);
  const double makespan = exact.makespan.value;
  EXPECT_NEAR(fast.makespan.value, makespan, kTolerance * makespan);
  double worst = 0;
  for (std::size_t t = 0; t < exact.tasks.size(); ++t)
    worst = std::max(worst, std::abs(fast.tasks[t].end.value - exact.tasks[t].end.value));
  EXPECT_LE(worst, kTolerance * makespan);
  expect_within_capacity(m, fast);
}

// Many flows over few resources, few dependencies: large contended components.
Model random_model(std::mt19937& rng) {
  Model m;
  const int resources = std::uniform_int_distribution<>(2, 10)(rng);
  for (int r = 0; r < resources; ++r)
    m.add_resource("r", BytesPerSecond::from_gbps(std::uniform_real_distribution<>(1, 10)(rng)));
  const int tasks = std::uniform_int_distribution<>(30, 60)(rng);
  for (int t = 0; t < tasks; ++t) {
    TaskSpec s{.bytes = Bytes{std::uniform_int_distribution<std::int64_t>(100'000'000, 5'000'000'000)(rng)}};
    if (std::bernoulli_distribution(0.5)(rng))
      s.latency = Seconds{std::uniform_real_distribution<>(0, 0.05)(rng)};
    const int crossed = std::uniform_int_distribution<>(1, std::min(3, resources))(rng);
    for (int k = 0; k < crossed; ++k)
      s.resources.push_back(ResourceId{std::uniform_int_distribution<>(0, resources - 1)(rng)});
    for (int d = 0; d < t; ++d)
      if (std::bernoulli_distribution(0.02)(rng)) s.deps.push_back(TaskId{d});
    m.add_task(s);
  }
  return m;
}

TEST(SimulateTolerance, RandomModelsStayWithinTheTolerance) {
  std::mt19937 rng(21);
  for (int i = 0; i < 300; ++i) {
    SCOPED_TRACE(testing::Message() << "model " << i);
    expect_close_to_exact(random_model(rng));
  }
}

// Every NIC sends `messages` of 64 to 128 MiB, `window` at a time, to all the others in turn.
Model all_to_all(std::int32_t nics, std::int32_t messages, std::int32_t window) {
  Model m;
  for (std::int32_t n = 0; n < 2 * nics; ++n) m.add_resource("nic", BytesPerSecond::from_gbps(50));
  std::mt19937 rng(static_cast<unsigned>(nics * window));
  std::uniform_int_distribution<std::int64_t> size(64 << 20, 128 << 20);
  for (std::int32_t s = 0; s < nics; ++s) {
    const TaskId first{m.task_count()};
    for (std::int32_t k = 0; k < messages; ++k) {
      TaskSpec spec{.bytes = Bytes{size(rng)},
                    .latency = Seconds{10e-6},
                    .resources = {ResourceId{s}, ResourceId{nics + (s + 1 + k) % nics}}};
      if (k >= window) spec.deps.push_back(TaskId{first.value + k - window});
      m.add_task(spec);
    }
  }
  return m;
}

TEST(SimulateTolerance, AllToAllsStayWithinTheTolerance) {
  for (const std::int32_t window : {4, 8, 16}) {
    SCOPED_TRACE(testing::Message() << "window " << window);
    expect_close_to_exact(all_to_all(64, 32, window));
  }
}

}  // namespace
}  // namespace refit::sim
