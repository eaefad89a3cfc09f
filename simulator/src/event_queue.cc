#include "event_queue.h"

#include <algorithm>

namespace refit::sim {

void EventQueue::sift_up(std::size_t i) {
  const Event e = heap_[i];
  while (i > 0) {
    const std::size_t parent = (i - 1) / kArity;
    if (!before(e, heap_[parent])) break;
    place(i, heap_[parent]);
    i = parent;
  }
  place(i, e);
}

void EventQueue::sift_down(std::size_t i) {
  const Event e = heap_[i];
  const std::size_t n = heap_.size();
  for (;;) {
    const std::size_t first = kArity * i + 1;
    if (first >= n) break;
    std::size_t child = first;
    for (std::size_t c = first + 1; c < std::min(first + kArity, n); ++c)
      if (before(heap_[c], heap_[child])) child = c;
    if (!before(heap_[child], e)) break;
    place(i, heap_[child]);
    i = child;
  }
  place(i, e);
}

// A new event joins the run when it is as late as the run's last (so the run stays sorted), or
// starts one when it is no later than everything in the heap; anything else goes to the heap.
void EventQueue::insert(const Event& e) {
  const bool run_empty = run_head_ == run_.size();
  if (run_empty ? heap_.empty() || e.time <= heap_.front().time : run_.back().time == e.time) {
    if (run_empty) {
      run_.clear();
      run_head_ = 0;
    }
    position_[static_cast<std::size_t>(e.task)] = kInRun | static_cast<std::uint32_t>(run_.size());
    run_.push_back(e);
    return;
  }
  heap_.push_back(e);
  sift_up(heap_.size() - 1);
}

void EventQueue::set(std::int32_t task, double time, EventKind kind) {
  const Event e{.time = time, .seq = next_seq_++, .task = task, .kind = kind};
  const std::uint32_t at = position_[static_cast<std::size_t>(task)];
  if (at != kAbsent && (at & kInRun) == 0) {
    const bool earlier = before(e, heap_[at]);
    heap_[at] = e;
    if (earlier)
      sift_up(at);
    else
      sift_down(at);
    return;
  }
  if (at != kAbsent) run_erase(at & ~kInRun);
  insert(e);
}

void EventQueue::run_erase(std::size_t at) {
  run_[at].task = -1;
  while (run_head_ < run_.size() && run_[run_head_].task < 0) ++run_head_;
}

void EventQueue::heap_erase(std::size_t at) {
  const Event last = heap_.back();
  heap_.pop_back();
  if (at == heap_.size()) return;
  const bool earlier = before(last, heap_[at]);
  place(at, last);
  if (earlier)
    sift_up(at);
  else
    sift_down(at);
}

void EventQueue::erase(std::int32_t task) {
  const std::uint32_t at = position_[static_cast<std::size_t>(task)];
  if (at == kAbsent) return;
  position_[static_cast<std::size_t>(task)] = kAbsent;
  if (at & kInRun)
    run_erase(at & ~kInRun);
  else
    heap_erase(at);
}

Event EventQueue::pop() {
  const Event e = top();
  erase(e.task);
  return e;
}

}  // namespace refit::sim
