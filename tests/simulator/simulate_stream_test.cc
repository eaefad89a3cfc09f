// Streams: a connection's messages in order, pipelined. Timings worked out by hand on one NIC of
// capacity C = 50 GB/s, messages of b = 1 GB, latency alpha = 10 us.
#include <gtest/gtest.h>

#include "refit/simulator/simulate.h"

namespace refit::sim {
namespace {

constexpr double kC = 50e9;
constexpr double kB = 1e9;
constexpr double kAlpha = 10e-6;
constexpr double kTol = 1e-12;

SimulationResult run(const Model& m) {
  auto r = simulate(m);
  EXPECT_TRUE(r.has_value()) << r.error().message;
  return std::move(*r);
}

const TaskTiming& of(const SimulationResult& r, TaskId t) {
  return r.tasks[static_cast<std::size_t>(t.value)];
}

TaskSpec message(ResourceId nic, std::int32_t stream, double gigabytes = 1) {
  return {.bytes = Bytes{static_cast<std::int64_t>(gigabytes * kB)},
          .latency = Seconds{kAlpha},
          .resources = {nic},
          .stream = stream};
}

TEST(SimulateStream, MessagesQueuedTogetherPayTheLatencyOnce) {
  // Both ready at 0: the second's latency is paid while the first flows, so it follows at once:
  // alpha + b/C and alpha + 2b/C.
  Model m;
  const auto nic = m.add_resource("nic", BytesPerSecond{kC});
  const auto s = m.add_stream();
  const auto first = m.add_task(message(nic, s));
  const auto second = m.add_task(message(nic, s));
  const auto r = run(m);
  EXPECT_NEAR(of(r, first).end.value, kAlpha + kB / kC, kTol);
  EXPECT_EQ(of(r, second).start, of(r, first).end);
  EXPECT_NEAR(of(r, second).end.value, kAlpha + 2 * kB / kC, kTol);
}

TEST(SimulateStream, AStreamIsOneFlowAtItsResources) {
  // A stream of two messages of b and a flow of 2b share the NIC: two flows at C/2 each, so the
  // first message ends at alpha + 2b/C and both the stream and the flow at alpha + 4b/C. (As
  // three independent flows the first message would end at alpha + 3b/C.)
  Model m;
  const auto nic = m.add_resource("nic", BytesPerSecond{kC});
  const auto s = m.add_stream();
  const auto first = m.add_task(message(nic, s));
  const auto second = m.add_task(message(nic, s));
  const auto other = m.add_task(message(nic, -1, 2));
  const auto r = run(m);
  EXPECT_NEAR(of(r, first).end.value, kAlpha + 2 * kB / kC, kTol);
  EXPECT_NEAR(of(r, second).end.value, kAlpha + 4 * kB / kC, kTol);
  EXPECT_NEAR(of(r, other).end.value, kAlpha + 4 * kB / kC, kTol);
}

TEST(SimulateStream, AMessageReadyLateStallsTheStream) {
  // The second message waits for a task on another NIC that ends at alpha + 2b/C, after the
  // first message (alpha + b/C): it starts a latency later, at 2 alpha + 2b/C, and the third,
  // queued behind it, follows it although its own data was there from the start.
  Model m;
  const auto nic = m.add_resource("nic", BytesPerSecond{kC});
  const auto elsewhere = m.add_resource("elsewhere", BytesPerSecond{kC});
  const auto s = m.add_stream();
  const auto upstream = m.add_task(message(elsewhere, -1, 2));
  const auto first = m.add_task(message(nic, s));
  auto late = message(nic, s);
  late.deps = {upstream};
  const auto second = m.add_task(late);
  const auto third = m.add_task(message(nic, s));
  const auto r = run(m);
  EXPECT_NEAR(of(r, first).end.value, kAlpha + kB / kC, kTol);
  EXPECT_NEAR(of(r, second).start.value, 2 * kAlpha + 2 * kB / kC, kTol);
  EXPECT_NEAR(of(r, third).end.value, 2 * kAlpha + 4 * kB / kC, kTol);
  // The critical path runs through the upstream task, then down the stream.
  ASSERT_EQ(r.critical_path.size(), 3u);
  EXPECT_EQ(r.critical_path[0].task, upstream);
  EXPECT_EQ(r.critical_path[1].task, second);
  EXPECT_EQ(r.critical_path[2].task, third);
  EXPECT_EQ(r.critical_path[2].link, CriticalLink::kDependency);
}

TEST(SimulateStream, MessagesOnOtherResourcesStillGoInOrder) {
  // The second message crosses another NIC: no hand-over, but it starts only when the first
  // ends: alpha + b/C + b/C.
  Model m;
  const auto a = m.add_resource("a", BytesPerSecond{kC});
  const auto b = m.add_resource("b", BytesPerSecond{kC});
  const auto s = m.add_stream();
  m.add_task(message(a, s));
  const auto second = m.add_task(message(b, s));
  const auto r = run(m);
  EXPECT_NEAR(of(r, second).end.value, kAlpha + 2 * kB / kC, kTol);
}

TEST(SimulateStream, TheCriticalPathFollowsTheLatencyWhenItOutlastsThePreviousTask) {
  // The second message waits for a task that ends at 0.5 b/C, then pays 3 alpha' of latency
  // (alpha' = b/C): it starts at 3.5 b/C, after the first message's end at alpha + b/C. Its
  // step on the critical path comes from the dependency, with the latency counted.
  Model m;
  const auto nic = m.add_resource("nic", BytesPerSecond{kC});
  const auto elsewhere = m.add_resource("elsewhere", BytesPerSecond{kC});
  const auto s = m.add_stream();
  const auto upstream = m.add_task(message(elsewhere, -1, 0.5));
  m.add_task(message(nic, s));
  auto late = message(nic, s);
  late.deps = {upstream};
  late.latency = Seconds{3 * kB / kC};
  const auto second = m.add_task(late);
  const auto r = run(m);
  EXPECT_NEAR(of(r, second).start.value, kAlpha + 3.5 * kB / kC, kTol);
  ASSERT_EQ(r.critical_path.size(), 2u);
  EXPECT_EQ(r.critical_path[0].task, upstream);
  EXPECT_EQ(r.critical_path[1].task, second);
  EXPECT_NEAR(r.breakdown.latency.value, kAlpha + 3 * kB / kC, kTol);
}

// Two messages queued together on one stream, each with an overhead of b/(4C).
struct TwoMessages {
  static constexpr double kO = kB / kC / 4;
  Model model;
  TaskId first, second;
};

TwoMessages two_messages_with_overheads() {
  TwoMessages out;
  const auto nic = out.model.add_resource("nic", BytesPerSecond{kC});
  auto spec = message(nic, out.model.add_stream());
  spec.overhead = Seconds{TwoMessages::kO};
  out.first = out.model.add_task(spec);
  out.second = out.model.add_task(spec);
  return out;
}

TEST(SimulateStream, OverheadsAddUpAfterThePreviousMessage) {
  // Two messages queued together, each with an overhead o = b/(4C) (the sender's own time per
  // message). The second's latency hides behind the first, its overhead does not: the first
  // flows from alpha + o and ends at alpha + o + b/C; the second pays o after that and ends at
  // alpha + 2o + 2b/C. The critical path counts alpha + 2o as latency.
  const auto [m, first, second] = two_messages_with_overheads();
  const double o = TwoMessages::kO;
  const auto r = run(m);
  EXPECT_NEAR(of(r, first).start.value, kAlpha + o, kTol);
  EXPECT_NEAR(of(r, first).end.value, kAlpha + o + kB / kC, kTol);
  EXPECT_NEAR(of(r, second).start.value, kAlpha + 2 * o + kB / kC, kTol);
  EXPECT_NEAR(of(r, second).end.value, kAlpha + 2 * o + 2 * kB / kC, kTol);
  ASSERT_EQ(r.critical_path.size(), 2u);
  EXPECT_EQ(r.critical_path[1].task, second);
  EXPECT_EQ(r.critical_path[1].link, CriticalLink::kDependency);
  EXPECT_NEAR(r.breakdown.latency.value, kAlpha + 2 * o, kTol);
}

TEST(SimulateStream, WhileASenderPaysItsOverheadOthersHaveTheLink) {
  // A message with no latency but an overhead of b/C, and a flow of b on the same NIC: the flow
  // has the NIC alone until b/C (it ends there), then the message flows alone until 2b/C. Had
  // the overhead been bytes on the NIC, both would have shared it.
  Model m;
  const auto nic = m.add_resource("nic", BytesPerSecond{kC});
  const auto s = m.add_stream();
  auto spec = message(nic, s);
  spec.latency = Seconds{0};
  spec.overhead = Seconds{kB / kC};
  const auto busy = m.add_task(spec);
  const auto other = m.add_task({.bytes = Bytes{static_cast<std::int64_t>(kB)}, .resources = {nic}});
  const auto r = run(m);
  EXPECT_NEAR(of(r, other).end.value, kB / kC, kTol);
  EXPECT_NEAR(of(r, busy).start.value, kB / kC, kTol);
  EXPECT_NEAR(of(r, busy).end.value, 2 * kB / kC, kTol);
}

TEST(SimulateStream, AnOverheadEndingInsideAWiderInstantStillFollowsThePreviousMessage) {
  // The two messages above, simulated with instants of 1e-2, and a task of no bytes whose latency
  // ends at N = alpha + 2o + b/C + 20 us, 2e-5 after the second's overhead and inside its slack
  // (2e-5 < 1e-2 x o = 5e-5): both events are handled at N,
  // so the second message starts at N, 20 us past the first's end + o. The critical path still
  // runs first -> second, through the stream, and counts alpha + o + (N - first's end) as latency.
  auto [m, first, second] = two_messages_with_overheads();
  const double o = TwoMessages::kO;
  const double nudge = kAlpha + 2 * o + kB / kC + 20e-6;
  m.add_task({.latency = Seconds{nudge}});
  auto r = simulate(m, {.instant = 1e-2});
  ASSERT_TRUE(r.has_value()) << r.error().message;
  EXPECT_NEAR(of(*r, second).start.value, nudge, kTol);
  ASSERT_EQ(r->critical_path.size(), 2u);
  EXPECT_EQ(r->critical_path[0].task, first);
  EXPECT_EQ(r->critical_path[1].task, second);
  EXPECT_EQ(r->critical_path[1].link, CriticalLink::kDependency);
  EXPECT_NEAR(r->breakdown.latency.value, kAlpha + o + (nudge - (kAlpha + o + kB / kC)), kTol);
}

TEST(SimulateStream, ATaskOfNoBytesEndsWhenItsOverheadIsPaid) {
  // Latency alpha, then the overhead o = 3 alpha: it ends at 4 alpha.
  Model m;
  const auto t = m.add_task({.latency = Seconds{kAlpha}, .overhead = Seconds{3 * kAlpha}});
  const auto r = run(m);
  EXPECT_NEAR(of(r, t).end.value, 4 * kAlpha, kTol);
}

TEST(SimulateStream, ANegativeOverheadIsRefusedWithTheTask) {
  Model m;
  const auto nic = m.add_resource("nic", BytesPerSecond{kC});
  auto spec = message(nic, -1);
  spec.overhead = Seconds{-1e-6};
  spec.label = "put";
  m.add_task(spec);
  const auto r = simulate(m);
  ASSERT_FALSE(r.has_value());
  EXPECT_NE(r.error().message.find("put"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("overhead must be finite and not negative"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace refit::sim
