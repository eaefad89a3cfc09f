// EventQueue against a brute-force reference: random sets (new events and moved ones), erases and
// pops on a few tasks with few distinct times (many ties). The queue must pop exactly what the
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

TEST(EventQueue, PopsTheEarliestFirstComeFirstServedAsABruteForceReference) {
  std::mt19937 rng(31);
  for (int trial = 0; trial < 50; ++trial) {
    const int tasks = std::uniform_int_distribution<>(1, 40)(rng);
    EventQueue q(static_cast<std::size_t>(tasks));
    Reference ref;
    std::uniform_int_distribution<> task(0, tasks - 1), time(0, 5), op(0, 9);
    for (int step = 0; step < 2000; ++step) {
      const int o = op(rng);
      const std::int32_t t = task(rng);
      if (o < 6) {  // a new event, or the task's event moved (a flow's rate changed)
        const double when = time(rng);
        const auto kind = o % 2 ? EventKind::kFlowDone : EventKind::kLatencyPaid;
        q.set(t, when, kind);
        ref.set(t, when, kind);
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
        ref.events.erase(want);
      }
      ASSERT_EQ(q.empty(), ref.events.empty());
    }
  }
}

}  // namespace
}  // namespace refit::sim
