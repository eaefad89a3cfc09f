// EventQueue against a brute-force reference: random sets (new events and moved ones), erases and
// pops on a few tasks with few distinct times (many ties), in any order or mostly at the time
// last popped. The queue must pop exactly what the
// reference's minimum is: the earliest time, and among equal times the event set first.
#include "event_queue.h"

#include <map>
#include <random>
#include <utility>

#include <gtest/gtest.h>

namespace refit::sim {
namespace {

// task -> (time, order of its last set), and the event's kind.
struct Reference {
  std::map<std::int32_t, std::pair<std::pair<double, std::uint64_t>, EventKind>> events;
  std::uint64_t next = 0;

  void set(std::int32_t task, double time, EventKind kind) { events[task] = {{time, next++}, kind}; }
  // The earliest (time, order): what pop() must return.
  std::int32_t first() const {
    auto best = events.begin();
    for (auto it = events.begin(); it != events.end(); ++it)
      if (it->second.first < best->second.first) best = it;
    return best->first;
  }
};

// Random sets, erases and pops on up to 40 tasks, each set at the time `when(rng, now)` gives,
// `now` being the time of the last pop; every pop checked against the reference.
template <class When>
void check_against_reference(std::uint32_t seed, When when) {
  std::mt19937 rng(seed);
  for (int trial = 0; trial < 50; ++trial) {
    const int tasks = std::uniform_int_distribution<>(1, 40)(rng);
    EventQueue q(static_cast<std::size_t>(tasks));
    Reference ref;
    double now = 0;
    std::uniform_int_distribution<> task(0, tasks - 1), op(0, 9);
    for (int step = 0; step < 2000; ++step) {
      const int o = op(rng);
      const std::int32_t t = task(rng);
      if (o < 6) {  // a new event, or the task's event moved (a flow's rate changed)
        const double at = when(rng, now);
        const auto kind = o % 2 ? EventKind::kFlowDone : EventKind::kLatencyPaid;
        q.set(t, at, kind);
        ref.set(t, at, kind);
      } else if (o < 8) {
        q.erase(t);
        ref.events.erase(t);
      } else if (!ref.events.empty()) {
        const std::int32_t want = ref.first();
        ASSERT_FALSE(q.empty());
        ASSERT_EQ(q.top().task, want);
        const Event e = q.pop();
        EXPECT_EQ(e.time, ref.events[want].first.first);
        EXPECT_EQ(e.kind, ref.events[want].second);
        now = e.time;
        ref.events.erase(want);
      }
      ASSERT_EQ(q.empty(), ref.events.empty());
    }
  }
}

TEST(EventQueue, PopsTheEarliestFirstComeFirstServedAsABruteForceReference) {
  // Few distinct times, in any order: many ties.
  check_against_reference(
      31, [](std::mt19937& rng, double) { return std::uniform_int_distribution<>(0, 5)(rng); });
}

TEST(EventQueue, KeepsTheOrderWhenManyEventsComeAtTheTimeOfTheLastPop) {
  // As the engine sets them: mostly at the time just popped (zero-latency successors, which the
  // queue keeps in a run of their own beside the heap), some later, now and then earlier.
  check_against_reference(32, [](std::mt19937& rng, double now) {
    const int r = std::uniform_int_distribution<>(0, 9)(rng);
    return r < 6 ? now : r < 9 ? now + r - 5 : now - 1;
  });
}

}  // namespace
}  // namespace refit::sim
