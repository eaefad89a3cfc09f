// Property test: the incremental engine against a brute-force reference on random small models.
//
// The reference shares no code with the engine. At every event it recomputes the max-min rates
// of ALL active flows from scratch, with the textbook progressive filling done by linear scans
// (find the resource with the smallest remaining capacity / unfrozen flows, freeze its flows,
// repeat), then advances time to the next event: a latency running out or a flow finishing at
// its current rate. The engine instead re-solves only a region around each change. Both must
// give every task the same ready, start and end times (up to rounding: 1e-9 of the makespan).
// Also checked on every model: the breakdown adds up to the makespan, each critical step is
// linked to the previous one as it claims, and a second run gives identical timings.
#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include <gtest/gtest.h>

#include "refit/simulator/simulate.h"

namespace refit::sim {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<double> naive_max_min(const Model& m, const std::vector<std::int32_t>& flows) {
  std::vector<double> left, rate(flows.size(), -1.0);
  for (std::int32_t r = 0; r < m.resource_count(); ++r) left.push_back(m.capacity(ResourceId{r}).value);
  for (;;) {
    double best = kInf;
    std::int32_t bottleneck = -1;
    for (std::int32_t r = 0; r < m.resource_count(); ++r) {
      int unfrozen = 0;
      for (std::size_t f = 0; f < flows.size(); ++f)
        for (const auto q : m.resources(TaskId{flows[f]})) unfrozen += rate[f] < 0 && q.value == r;
      if (unfrozen > 0 && left[static_cast<std::size_t>(r)] / unfrozen < best) {
        best = left[static_cast<std::size_t>(r)] / unfrozen;
        bottleneck = r;
      }
    }
    if (bottleneck < 0) return rate;
    for (std::size_t f = 0; f < flows.size(); ++f) {
      const auto rs = m.resources(TaskId{flows[f]});
      if (rate[f] >= 0 || std::none_of(rs.begin(), rs.end(), [&](auto q) { return q.value == bottleneck; }))
        continue;
      rate[f] = best;
      for (const auto q : rs) left[static_cast<std::size_t>(q.value)] -= best;
    }
  }
}

std::vector<TaskTiming> reference_simulate(const Model& m) {
  const auto n = static_cast<std::size_t>(m.task_count());
  std::vector<double> ready(n, -1), start(n, -1), end(n, -1), remaining(n);
  for (std::size_t t = 0; t < n; ++t)
    remaining[t] = static_cast<double>(m.bytes(TaskId{static_cast<std::int32_t>(t)}).value);
  double now = 0;
  for (;;) {
    // Settle the instant: readiness, latencies that ran out, zero-byte tasks, until nothing moves.
    for (bool moved = true; moved;) {
      moved = false;
      for (std::size_t t = 0; t < n; ++t) {
        const TaskId id{static_cast<std::int32_t>(t)};
        const auto deps = m.deps(id);
        if (ready[t] < 0 && std::all_of(deps.begin(), deps.end(), [&](TaskId d) {
              return end[static_cast<std::size_t>(d.value)] >= 0;
            })) {
          ready[t] = now;
          moved = true;
        }
        const std::int32_t previous = m.stream_previous(id);
        const bool stream_free = previous < 0 || end[static_cast<std::size_t>(previous)] >= 0;
        if (ready[t] >= 0 && start[t] < 0 && stream_free &&
            ready[t] + m.latency(id).value <= now * (1 + 1e-12)) {
          start[t] = now;
          if (remaining[t] == 0) end[t] = now;
          moved = true;
        }
      }
    }
    std::vector<std::int32_t> active;
    double next = kInf;
    for (std::size_t t = 0; t < n; ++t) {
      if (start[t] >= 0 && end[t] < 0) active.push_back(static_cast<std::int32_t>(t));
      const TaskId id{static_cast<std::int32_t>(t)};
      if (ready[t] >= 0 && start[t] < 0 && ready[t] + m.latency(id).value > now)
        next = std::min(next, ready[t] + m.latency(id).value);
    }
    const auto rate = naive_max_min(m, active);
    for (std::size_t i = 0; i < active.size(); ++i)
      next = std::min(next, now + remaining[static_cast<std::size_t>(active[i])] / rate[i]);
    if (next == kInf) break;
    for (std::size_t i = 0; i < active.size(); ++i) {
      const auto t = static_cast<std::size_t>(active[i]);
      if (now + remaining[t] / rate[i] <= next * (1 + 1e-12)) end[t] = next;
      remaining[t] -= rate[i] * (next - now);
    }
    now = next;
  }
  std::vector<TaskTiming> out;
  for (std::size_t t = 0; t < n; ++t)
    out.push_back({.ready = Seconds{ready[t]}, .start = Seconds{start[t]}, .end = Seconds{end[t]}});
  return out;
}

struct Shape {
  int max_resources;
  int max_tasks;
  double dependency_probability;
  double stream_probability = 0;  // of each task joining one of three streams
};

Model random_model(std::mt19937& rng, Shape shape) {
  Model m;
  const int resources = std::uniform_int_distribution<>(1, shape.max_resources)(rng);
  for (int r = 0; r < resources; ++r)
    m.add_resource("r", BytesPerSecond::from_gbps(std::uniform_real_distribution<>(1, 10)(rng)));
  const int tasks = std::uniform_int_distribution<>(1, shape.max_tasks)(rng);
  for (int t = 0; t < tasks; ++t) {
    TaskSpec s;
    if (!std::bernoulli_distribution(0.2)(rng))
      s.bytes = Bytes{std::uniform_int_distribution<std::int64_t>(100'000'000, 5'000'000'000)(rng)};
    if (std::bernoulli_distribution(0.5)(rng))
      s.latency = Seconds{std::uniform_real_distribution<>(0, 0.5)(rng)};
    const int crossed = std::uniform_int_distribution<>(1, std::min(3, resources))(rng);
    for (int k = 0; k < crossed; ++k)
      s.resources.push_back(ResourceId{std::uniform_int_distribution<>(0, resources - 1)(rng)});
    for (int d = 0; d < t; ++d)
      if (std::bernoulli_distribution(shape.dependency_probability)(rng)) s.deps.push_back(TaskId{d});
    s.category = static_cast<std::uint32_t>(std::uniform_int_distribution<>(0, 3)(rng));
    if (shape.stream_probability > 0 && std::bernoulli_distribution(shape.stream_probability)(rng)) {
      // Streams mostly cross one set of resources, as a connection does, so that hand-overs occur.
      const int stream = std::uniform_int_distribution<>(0, 2)(rng);
      while (m.stream_count() <= stream) m.add_stream();
      s.stream = stream;
      if (!std::bernoulli_distribution(0.2)(rng)) s.resources = {ResourceId{stream % resources}};
    }
    m.add_task(s);
  }
  return m;
}

bool shares_resource(const Model& m, TaskId a, TaskId b) {
  for (const auto r : m.resources(a))
    for (const auto q : m.resources(b))
      if (r == q) return true;
  return false;
}

void check_critical_path(const Model& m, const SimulationResult& r) {
  double total = r.breakdown.latency.value;
  for (const Seconds c : r.breakdown.by_category) total += c.value;
  EXPECT_NEAR(total, r.makespan.value, 1e-9 * r.makespan.value);
  ASSERT_FALSE(r.critical_path.empty());
  EXPECT_EQ(r.critical_path.front().link, CriticalLink::kFirst);
  EXPECT_EQ(r.tasks[static_cast<std::size_t>(r.critical_path.back().task.value)].end, r.makespan);
  for (std::size_t i = 1; i < r.critical_path.size(); ++i) {
    const auto& s = r.critical_path[i];
    const TaskId previous = r.critical_path[i - 1].task;
    EXPECT_EQ(s.from, r.tasks[static_cast<std::size_t>(previous.value)].end);
    if (s.link == CriticalLink::kDependency) {
      const auto deps = m.deps(s.task);
      EXPECT_TRUE(std::find(deps.begin(), deps.end(), previous) != deps.end() ||
                  m.stream_previous(s.task) == previous.value);
    } else {
      EXPECT_EQ(s.link, CriticalLink::kContention);
      EXPECT_TRUE(shares_resource(m, s.task, previous));
    }
  }
}

void compare_with_reference(Shape shape, unsigned seed, int models) {
  std::mt19937 rng(seed);
  for (int i = 0; i < models; ++i) {
    const Model m = random_model(rng, shape);
    const auto got = simulate(m);
    ASSERT_TRUE(got.has_value()) << got.error().message;
    const auto want = reference_simulate(m);
    const double tol = 1e-9 * std::max(got->makespan.value, 1e-9);
    for (std::size_t t = 0; t < want.size(); ++t) {
      SCOPED_TRACE(testing::Message() << "model " << i << " task " << t);
      EXPECT_NEAR(got->tasks[t].ready.value, want[t].ready.value, tol);
      EXPECT_NEAR(got->tasks[t].start.value, want[t].start.value, tol);
      EXPECT_NEAR(got->tasks[t].end.value, want[t].end.value, tol);
    }
    check_critical_path(m, *got);
    const auto again = simulate(m);
    for (std::size_t t = 0; t < want.size(); ++t) EXPECT_EQ(again->tasks[t].end, got->tasks[t].end);
  }
}

TEST(SimulateProperty, SmallModelsWithDependenciesMatchTheReference) {
  compare_with_reference({.max_resources = 5, .max_tasks = 14, .dependency_probability = 0.2}, 1, 400);
}

TEST(SimulateProperty, ManyConcurrentFlowsMatchTheReference) {
  // Few dependencies and many flows over few resources: large contended components, where the
  // engine's region has to grow several rounds before it is accepted.
  compare_with_reference({.max_resources = 10, .max_tasks = 60, .dependency_probability = 0.02}, 2, 150);
}

TEST(SimulateProperty, StreamsMatchTheReference) {
  // Tasks of a stream start in order, each once its latency is paid and the one before it has
  // ended; the engine hands a stream's flow over from task to task without recomputing rates,
  // the reference recomputes them at every event.
  compare_with_reference(
      {.max_resources = 4, .max_tasks = 30, .dependency_probability = 0.05, .stream_probability = 0.6}, 3,
      300);
}

}  // namespace
}  // namespace refit::sim
