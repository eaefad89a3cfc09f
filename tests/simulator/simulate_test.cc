// simulate() on models whose timings can be worked out by hand.
#include <algorithm>

#include <gtest/gtest.h>

#include "refit/simulator/simulate.h"

namespace refit::sim {
namespace {

constexpr double kGB = 1e9;
constexpr double kTol = 1e-12;  // relative: these timings are exact up to rounding

BytesPerSecond gbps(double g) { return BytesPerSecond::from_gbps(g); }
Bytes gigabytes(double g) { return Bytes{static_cast<std::int64_t>(g * kGB)}; }

SimulationResult run(const Model& m) {
  auto r = simulate(m);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return std::move(*r);
}

double end_of(const SimulationResult& r, TaskId t) {
  return r.tasks[static_cast<std::size_t>(t.value)].end.value;
}

TEST(Simulate, OneFlowAloneTakesLatencyPlusBytesOverBandwidth) {
  // 3 GB over a 48 GB/s NIC after 15 us: 15e-6 + 3 / 48 s.
  Model m;
  const auto nic = m.add_resource("nic", gbps(48));
  const auto t = m.add_task({.bytes = gigabytes(3), .latency = Seconds{15e-6}, .resources = {nic}});
  const auto r = run(m);
  const double expected = 15e-6 + 3.0 / 48.0;
  EXPECT_NEAR(end_of(r, t), expected, expected * kTol);
  EXPECT_DOUBLE_EQ(r.tasks[0].ready.value, 0.0);
  EXPECT_DOUBLE_EQ(r.tasks[0].start.value, 15e-6);
  EXPECT_DOUBLE_EQ(r.makespan.value, end_of(r, t));
  EXPECT_EQ(r.resources[0].bytes, gigabytes(3));
  EXPECT_NEAR(r.resources[0].busy.value, 3.0 / 48.0, 1e-15);
  EXPECT_NEAR(r.resources[0].utilisation, (3.0 / 48.0) / expected, 1e-12);
}

TEST(Simulate, FlowsThroughOneNicShareItEqually) {
  // k = 5 flows of b = 2 GB leave one sender NIC (C = 50 GB/s), each to its own receiver NIC
  // of the same speed. The sender NIC is the bottleneck: each flow gets C/k = 10 GB/s and all
  // end together at latency + k*b/C = 10 us + 0.2 s.
  Model m;
  const auto tx = m.add_resource("tx", gbps(50));
  std::vector<TaskId> flows;
  for (int i = 0; i < 5; ++i) {
    const auto rx = m.add_resource("rx", gbps(50));
    flows.push_back(m.add_task({.bytes = gigabytes(2), .latency = Seconds{10e-6}, .resources = {tx, rx}}));
  }
  const auto r = run(m);
  for (const auto t : flows) EXPECT_NEAR(end_of(r, t), 10e-6 + 5 * 2.0 / 50.0, kTol);
  EXPECT_NEAR(r.resources[0].utilisation, 10.0 / (50 * (10e-6 + 0.2)), 1e-12);
}

TEST(Simulate, TextbookMaxMinWithReallocation) {
  // L1 = 1 GB/s, L2 = 2 GB/s. A (1 GB) on L1, B (2 GB) on L1+L2, C (4.5 GB) on L2.
  // [0, 2]: L1 is the bottleneck, A = B = 0.5, C = 2 - 0.5 = 1.5. A ends at 1 / 0.5 = 2 s;
  //         B has 1 GB left, C 4.5 - 3 = 1.5 GB.
  // [2, 3]: L1 gives B 1 and L2 shares 1 + 1: B = C = 1. B ends at 2 + 1 = 3 s; C has 0.5 GB left.
  // [3, ..]: C alone on L2 at 2 GB/s ends at 3 + 0.25 = 3.25 s.
  Model m;
  const auto l1 = m.add_resource("L1", gbps(1));
  const auto l2 = m.add_resource("L2", gbps(2));
  const auto a = m.add_task({.bytes = gigabytes(1), .resources = {l1}});
  const auto b = m.add_task({.bytes = gigabytes(2), .resources = {l1, l2}});
  const auto c = m.add_task({.bytes = gigabytes(4.5), .resources = {l2}});
  const auto r = run(m);
  EXPECT_NEAR(end_of(r, a), 2.0, kTol);
  EXPECT_NEAR(end_of(r, b), 3.0, kTol);
  EXPECT_NEAR(end_of(r, c), 3.25, kTol);
  EXPECT_NEAR(r.resources[0].busy.value, 3.0, kTol);  // L1 carries A and B until 3 s
  EXPECT_NEAR(r.resources[1].utilisation, 6.5 / (2 * 3.25), kTol);
}

// Chunk k of hop j waits for chunk k of hop j-1 (it must have arrived) and for chunk k-1 of
// hop j (in-order link). Hop j crosses GPU j's egress and GPU j+1's ingress.
TaskId relay_chain(Model& m, int hops, int chunks, Bytes chunk, Seconds latency) {
  std::vector<ResourceId> out, in;
  for (int g = 0; g <= hops; ++g) {
    out.push_back(m.add_resource("out", gbps(100)));
    in.push_back(m.add_resource("in", gbps(100)));
  }
  std::vector<TaskId> previous_hop(static_cast<std::size_t>(hops));
  TaskId last{};
  for (int k = 0; k < chunks; ++k)
    for (int j = 0; j < hops; ++j) {
      TaskSpec s{.bytes = chunk,
                 .latency = latency,
                 .resources = {out[static_cast<std::size_t>(j)], in[static_cast<std::size_t>(j + 1)]}};
      if (j > 0) s.deps.push_back(last);
      if (k > 0) s.deps.push_back(previous_hop[static_cast<std::size_t>(j)]);
      last = previous_hop[static_cast<std::size_t>(j)] = m.add_task(s);
    }
  return last;
}

TEST(Simulate, RelayChainPipelinesChunks) {
  // h = 4 hops, a 1 GB message in n = 100 chunks of c = 10 MB, 100 GB/s links, no latency.
  // Every stage takes c/bw and the pipeline needs n + h - 1 stages:
  // bytes/bw + (h-1)*c/bw = 0.01 + 3 * 1e-4 = 0.0103 s.
  Model m;
  relay_chain(m, 4, 100, Bytes{10'000'000}, Seconds{0});
  const auto r = run(m);
  EXPECT_NEAR(r.makespan.value, 1.0 / 100 + 3 * 1e-2 / 100, 1e-12);
}

TEST(Simulate, RelayChainWithLatencyPaysItPerStage) {
  // As above with 20 us per message: each stage takes alpha + c/bw, so
  // (n + h - 1) * (alpha + c/bw) = 103 * (20e-6 + 1e-4) s.
  Model m;
  relay_chain(m, 4, 100, Bytes{10'000'000}, Seconds{20e-6});
  const auto r = run(m);
  EXPECT_NEAR(r.makespan.value, 103 * (20e-6 + 1e-4), 1e-12);
}

TEST(Simulate, DependenciesOrderTasks) {
  // a (1 GB at 1 GB/s) -> b (latency 0.5 s, 2 GB) -> c. b is ready when a ends (1 s), flows from
  // 1.5 s and ends at 3.5 s; c (1 GB) ends at 4.5 s. d has no dependency and shares nothing.
  Model m;
  const auto l = m.add_resource("l", gbps(1));
  const auto other = m.add_resource("other", gbps(1));
  const auto a = m.add_task({.bytes = gigabytes(1), .resources = {l}});
  const auto b = m.add_task({.bytes = gigabytes(2), .latency = Seconds{0.5}, .resources = {l}, .deps = {a}});
  const auto c = m.add_task({.bytes = gigabytes(1), .resources = {l}, .deps = {b}});
  const auto d = m.add_task({.bytes = gigabytes(1), .resources = {other}});
  const auto r = run(m);
  const auto& tb = r.tasks[static_cast<std::size_t>(b.value)];
  EXPECT_NEAR(tb.ready.value, 1.0, kTol);
  EXPECT_NEAR(tb.start.value, 1.5, kTol);
  EXPECT_NEAR(tb.end.value, 3.5, kTol);
  EXPECT_NEAR(end_of(r, c), 4.5, kTol);
  EXPECT_NEAR(end_of(r, d), 1.0, kTol);
}

TEST(Simulate, DependencyMayComeLaterInTheModel) {
  // Tasks may name a dependency added after them: b (added first) waits for a.
  Model m;
  const auto l = m.add_resource("l", gbps(1));
  const auto b = m.add_task({.bytes = gigabytes(1), .resources = {l}, .deps = {TaskId{1}}});
  m.add_task({.bytes = gigabytes(1), .resources = {l}});
  const auto r = run(m);
  EXPECT_NEAR(end_of(r, b), 2.0, kTol);
}

TEST(Simulate, ZeroByteTasksEndAfterTheirLatency) {
  // A zero-byte task is a pure delay (or a join): it loads no resource even if it lists one.
  // f1 (1 GB at 1 GB/s) ends at 1 s; the delay node ends at 1 + 0.25; the join of both ends at
  // 1.25 with no latency; f2 then flows alone at full rate (the zero-byte task on its resource
  // took no share) and ends at 1.25 + 1 = 2.25 s.
  Model m;
  const auto l = m.add_resource("l", gbps(1));
  const auto f1 = m.add_task({.bytes = gigabytes(1), .resources = {l}});
  const auto delay = m.add_task({.latency = Seconds{0.25}, .resources = {l}, .deps = {f1}});
  const auto join = m.add_task({.deps = {f1, delay}});
  const auto f2 = m.add_task({.bytes = gigabytes(1), .resources = {l}, .deps = {join}});
  const auto idle = m.add_task({});
  const auto r = run(m);
  EXPECT_NEAR(end_of(r, delay), 1.25, kTol);
  EXPECT_NEAR(end_of(r, join), 1.25, kTol);
  EXPECT_NEAR(end_of(r, f2), 2.25, kTol);
  EXPECT_EQ(end_of(r, idle), 0.0);
  EXPECT_EQ(r.resources[0].bytes, gigabytes(2));
}

TEST(Simulate, DuplicateResourcesCountOnce) {
  // Listing a resource twice does not halve the flow's rate: 1 GB at 1 GB/s takes 1 s.
  Model m;
  const auto l = m.add_resource("l", gbps(1));
  const auto t = m.add_task({.bytes = gigabytes(1), .resources = {l, l}});
  EXPECT_EQ(m.resources(t).size(), 1u);
  EXPECT_NEAR(end_of(run(m), t), 1.0, kTol);
}

TEST(Simulate, EmptyModel) {
  const auto r = run(Model{});
  EXPECT_EQ(r.makespan.value, 0.0);
  EXPECT_TRUE(r.critical_path.empty());
  EXPECT_EQ(r.events, 0u);
}

TEST(Simulate, ReportsProgress) {
  // 2,000 flows one after the other: the callback (every 0 s) sees a growing fraction <= 1.
  Model m;
  const auto l = m.add_resource("l", gbps(1));
  TaskSpec s{.bytes = Bytes{1000}, .resources = {l}};
  for (int i = 0; i < 2000; ++i) {
    s.deps.assign(i > 0 ? 1 : 0, TaskId{i - 1});
    m.add_task(s);
  }
  std::vector<double> seen;
  const auto r =
      simulate(m, {.progress = [&](double f) { seen.push_back(f); }, .progress_interval = Seconds{0}});
  ASSERT_TRUE(r.has_value());
  ASSERT_FALSE(seen.empty());
  EXPECT_TRUE(std::is_sorted(seen.begin(), seen.end()));
  EXPECT_LE(seen.back(), 1.0);
  EXPECT_EQ(r->events, 4000u);  // a latency event and a completion per flow
}

TEST(Simulate, AWiderInstantHandlesNearbyEventsTogetherAtTheLastOne) {
  // A (1 GB) and B (1.000004 GB) leave on their own 10 GB/s NICs: they end at 0.1 s and
  // 0.1000004 s, 4e-6 apart relative to the time. C (1 GB on A's NIC) waits for A.
  // Exact instants: A ends at 0.1 s and C at 0.2 s. With instant = 1e-5, A's end may wait 1e-5 of
  // A's 0.1 s (1e-6 s), so both ends belong to one instant, handled at its last event: A ends, and
  // C starts, at 0.1000004 s (C ends 0.2000004 s); never earlier than exact.
  Model m;
  const auto na = m.add_resource("nic a", gbps(10));
  const auto nb = m.add_resource("nic b", gbps(10));
  const auto a = m.add_task({.bytes = gigabytes(1), .resources = {na}});
  const auto b = m.add_task({.bytes = Bytes{1'000'004'000}, .resources = {nb}});
  const auto c = m.add_task({.bytes = gigabytes(1), .resources = {na}, .deps = {a}});
  const auto exact = run(m);
  EXPECT_NEAR(end_of(exact, a), 0.1, 0.1 * kTol);
  EXPECT_NEAR(end_of(exact, c), 0.2, 0.2 * kTol);
  auto wide = simulate(m, SimulateOptions{.instant = 1e-5});
  ASSERT_TRUE(wide) << wide.error().message;
  EXPECT_NEAR(end_of(*wide, a), 0.1000004, 0.1 * kTol);
  EXPECT_NEAR(end_of(*wide, b), 0.1000004, 0.1 * kTol);
  EXPECT_NEAR(end_of(*wide, c), 0.2000004, 0.2 * kTol);
}

TEST(Simulate, AnInstantDelaysAChainByItsFractionOfTheChainHoweverLateItRuns) {
  // A gate of no bytes ends at 100 s; then X, a chain of 100 flows of 1 MB on a 1 GB/s NIC, 1 ms
  // each: exact, X ends at 100.1 s. Beside it, tickers of no bytes end every 0.4 ms from
  // 100.002 s, none within the gate's slack (1e-5 x 100 s = 1 ms). Each of X's ends may wait
  // 1e-5 of its own 1 ms (10 ns), so X ends no later than 100.1 s + 1e-5 x 0.1 s. An instant
  // measured against the time (1e-5 x 100 s = 1 ms) would hold each of X's ends for the tickers
  // up to 1 ms after it, and X would end about 0.1 s late.
  Model m;
  const auto nic = m.add_resource("nic x", gbps(1));
  const auto gate = m.add_task({.latency = Seconds{100}});
  TaskId previous = gate;
  for (int k = 0; k < 100; ++k)
    previous = m.add_task({.bytes = Bytes{1'000'000}, .resources = {nic}, .deps = {previous}});
  for (int j = 0; j < 300; ++j) m.add_task({.latency = Seconds{100.002 + 0.4e-3 * j}});
  EXPECT_NEAR(end_of(run(m), previous), 100.1, 100.1 * kTol);
  auto wide = simulate(m, SimulateOptions{.instant = 1e-5});
  ASSERT_TRUE(wide) << wide.error().message;
  EXPECT_GE(end_of(*wide, previous), 100.1 * (1 - kTol));
  EXPECT_LE(end_of(*wide, previous), 100.1 * (1 + kTol) + 1e-5 * 0.1);
}

}  // namespace
}  // namespace refit::sim
