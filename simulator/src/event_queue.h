#pragma once
// The engine's pending events in (time, insertion) order, at most one per task: a task waits
// for its latency, its overhead or its flow to end, one after the other. Moving a task's event
// (its flow's rate changed) replaces it in place, so the queue holds only live events, however
// often rates change.
#include <cstdint>
#include <vector>

namespace refit::sim {

enum class EventKind : std::uint8_t { kLatencyPaid, kOverheadPaid, kFlowDone };

struct Event {
  double time;
  std::uint64_t seq;  // insertion order: equal times are handled first come, first served
  std::int32_t task;
  EventKind kind;
};

class EventQueue {
 public:
  explicit EventQueue(std::size_t tasks) : position_(tasks, kAbsent) {}

  // Schedules the task's event, replacing the one it had; it counts as inserted now.
  void set(std::int32_t task, double time, EventKind kind);
  void erase(std::int32_t task);
  bool empty() const { return heap_.empty() && run_head_ == run_.size(); }
  const Event& top() const { return run_first() ? run_[run_head_] : heap_.front(); }
  Event pop();

 private:
  static constexpr std::uint32_t kAbsent = UINT32_MAX;
  // Marks a position in run_ rather than in heap_ (neither holds 2^31 events: one per task).
  static constexpr std::uint32_t kInRun = 1u << 31;
  // Children per node: a 4-ary heap is half as deep as a binary one, and a node's children share
  // a cache line or two, which the engine's many re-timed flows (sift down) favour.
  static constexpr std::size_t kArity = 4;
  static bool before(const Event& a, const Event& b) {
    return a.time < b.time || (a.time == b.time && a.seq < b.seq);
  }
  bool run_first() const {
    return run_head_ < run_.size() && (heap_.empty() || before(run_[run_head_], heap_.front()));
  }
  void place(std::size_t i, const Event& e) {
    heap_[i] = e;
    position_[static_cast<std::size_t>(e.task)] = static_cast<std::uint32_t>(i);
  }
  void sift_up(std::size_t i);
  void sift_down(std::size_t i);
  void heap_erase(std::size_t at);
  void run_erase(std::size_t at);
  void insert(const Event& e);

  std::vector<Event> heap_;  // kArity-ary min-heap
  // Events of one time in insertion order, so sorted as the heap pops: those an engine instant
  // makes at its own time (a zero-latency successor) come first, and would each climb to the
  // heap's top only to sink from it at once. Erased ones are left as task -1, skipped at the head.
  std::vector<Event> run_;
  std::size_t run_head_ = 0;
  // Per task: its event's index in heap_, or kInRun | its index in run_, or kAbsent.
  std::vector<std::uint32_t> position_;
  std::uint64_t next_seq_ = 0;
};

}  // namespace refit::sim
