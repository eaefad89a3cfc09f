// The critical path and the breakdown of the makespan along it.
#include <gtest/gtest.h>

#include "refit/simulator/simulate.h"

namespace refit::sim {
namespace {

BytesPerSecond gbps(double g) { return BytesPerSecond::from_gbps(g); }
Bytes gigabytes(double g) { return Bytes{static_cast<std::int64_t>(g * 1e9)}; }

double sum(const Breakdown& b) {
  double s = b.latency.value;
  for (const Seconds c : b.by_category) s += c.value;
  return s;
}

TEST(CriticalPath, FollowsContentionThroughTheTextbookExample) {
  // The max-min example of simulate_test: A ends at 2 s, B at 3 s, C at 3.25 s (C is last).
  // C flowed slower than alone (4.5 GB at 2 GB/s would take 2.25 s): B shared L2 and ended at 3 s
  // while C flowed. B was slower than alone too; A shared L1 and ended at 2 s. A was slowed by
  // B, but nothing ended before it: the path starts there. Time: A 0-2, B 2-3, C 3-3.25.
  Model m;
  const auto l1 = m.add_resource("L1", gbps(1));
  const auto l2 = m.add_resource("L2", gbps(2));
  const auto a = m.add_task({.bytes = gigabytes(1), .resources = {l1}, .category = 0});
  const auto b = m.add_task({.bytes = gigabytes(2), .resources = {l1, l2}, .category = 1});
  const auto c = m.add_task({.bytes = gigabytes(4.5), .resources = {l2}, .category = 2});
  const auto r = simulate(m).value();
  ASSERT_EQ(r.critical_path.size(), 3u);
  EXPECT_EQ(r.critical_path[0].task, a);
  EXPECT_EQ(r.critical_path[0].link, CriticalLink::kFirst);
  EXPECT_EQ(r.critical_path[1].task, b);
  EXPECT_EQ(r.critical_path[1].link, CriticalLink::kContention);
  EXPECT_NEAR(r.critical_path[1].from.value, 2.0, 1e-12);
  EXPECT_EQ(r.critical_path[2].task, c);
  EXPECT_EQ(r.critical_path[2].link, CriticalLink::kContention);
  ASSERT_EQ(r.breakdown.by_category.size(), 3u);
  EXPECT_NEAR(r.breakdown.by_category[0].value, 2.0, 1e-12);
  EXPECT_NEAR(r.breakdown.by_category[1].value, 1.0, 1e-12);
  EXPECT_NEAR(r.breakdown.by_category[2].value, 0.25, 1e-12);
  EXPECT_EQ(r.breakdown.latency.value, 0.0);
}

TEST(CriticalPath, FollowsDependenciesAndCountsLatency) {
  // x (category 0: 1 GB at 1 GB/s after 0.1 s) -> y (category 1: 2 GB after 0.2 s), and an
  // unrelated short z. Path x, y: latency 0.3 s, category 0 1 s, category 1 2 s = 3.3 s.
  Model m;
  const auto l = m.add_resource("l", gbps(1));
  const auto other = m.add_resource("other", gbps(1));
  const auto x = m.add_task({.bytes = gigabytes(1), .latency = Seconds{0.1}, .resources = {l}});
  const auto y = m.add_task(
      {.bytes = gigabytes(2), .latency = Seconds{0.2}, .resources = {l}, .deps = {x}, .category = 1});
  m.add_task({.bytes = gigabytes(1), .resources = {other}, .category = 4});
  const auto r = simulate(m).value();
  ASSERT_EQ(r.critical_path.size(), 2u);
  EXPECT_EQ(r.critical_path[0].task, x);
  EXPECT_EQ(r.critical_path[1].task, y);
  EXPECT_EQ(r.critical_path[1].link, CriticalLink::kDependency);
  EXPECT_NEAR(r.breakdown.latency.value, 0.3, 1e-12);
  ASSERT_EQ(r.breakdown.by_category.size(), 5u);  // every category used has an entry
  EXPECT_NEAR(r.breakdown.by_category[0].value, 1.0, 1e-12);
  EXPECT_NEAR(r.breakdown.by_category[1].value, 2.0, 1e-12);
  EXPECT_EQ(r.breakdown.by_category[4].value, 0.0);
  EXPECT_NEAR(sum(r.breakdown), r.makespan.value, 1e-12);
}

TEST(CriticalPath, EqualSharersEndTogetherSoThePathIsOneTask) {
  // 4 equal flows through one NIC end at the same instant: none ended before the last one, so
  // the path is that task alone and its category holds the whole makespan.
  Model m;
  const auto nic = m.add_resource("nic", gbps(10));
  for (int i = 0; i < 4; ++i) m.add_task({.bytes = gigabytes(1), .resources = {nic}, .category = 2});
  const auto r = simulate(m).value();
  ASSERT_EQ(r.critical_path.size(), 1u);
  EXPECT_NEAR(r.breakdown.by_category[2].value, 0.4, 1e-12);
}

}  // namespace
}  // namespace refit::sim
