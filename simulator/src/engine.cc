#include "engine.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace refit::sim {
Engine::Engine(const Model& model, const Dependents& dependents, const SimulateOptions& options)
    : model_(model),
      dependents_(dependents),
      options_(options),
      network_(model, options.rate_tolerance),
      queue_(static_cast<std::size_t>(model.task_count())),
      pending_deps_(static_cast<std::size_t>(model.task_count())),
      done_(pending_deps_.size(), 0),
      waiting_(pending_deps_.size(), 0) {
  out_.timings.resize(pending_deps_.size());
  out_.flow_completions.reserve(pending_deps_.size());
}

void Engine::become_ready(std::int32_t task, double now) {
  out_.timings[at(task)].ready = Seconds{now};
  queue_.set(task, now + model_.latency(TaskId{task}).value, EventKind::kLatencyPaid);
}

void Engine::end_task(std::int32_t task, double now) {
  out_.timings[at(task)].end = Seconds{now};
  done_[at(task)] = 1;
  ++ended_;
  for (const std::int32_t d : dependents_.of(task))
    if (--pending_deps_[at(d)] == 0) become_ready(d, now);
  const std::int32_t next = model_.stream_next(TaskId{task});
  if (next >= 0 && waiting_[at(next)]) {
    waiting_[at(next)] = 0;
    start(next, now);
  }
}

void Engine::end_flow(std::int32_t task, double now) {
  out_.flow_completions.push_back(task);
  const std::int32_t next = model_.stream_next(TaskId{task});
  if (next >= 0 && waiting_[at(next)] && model_.overhead(TaskId{next}).value == 0 &&
      network_.can_hand_over(task, next)) {
    waiting_[at(next)] = 0;
    out_.timings[at(next)].start = Seconds{now};
    network_.hand_over(task, next, now);
    schedule_completion(next);
  } else {
    network_.finish(task, now);
  }
  end_task(task, now);
}

// The task may go: it pays its overhead, if any, then its data flows.
void Engine::start(std::int32_t task, double now) {
  const Seconds overhead = model_.overhead(TaskId{task});
  if (overhead.value > 0)
    queue_.set(task, now + overhead.value, EventKind::kOverheadPaid);
  else
    flow(task, now);
}

void Engine::flow(std::int32_t task, double now) {
  out_.timings[at(task)].start = Seconds{now};
  if (model_.bytes(TaskId{task}).value == 0)
    end_task(task, now);
  else
    network_.start(task, now);
}

void Engine::handle(const Event& event, double now) {
  const std::int32_t task = event.task;
  if (event.kind == EventKind::kFlowDone) {
    end_flow(task, now);
    return;
  }
  if (event.kind == EventKind::kOverheadPaid) {
    flow(task, now);
    return;
  }
  const std::int32_t previous = model_.stream_previous(TaskId{task});
  if (previous >= 0 && !done_[at(previous)])
    waiting_[at(task)] = 1;  // the stream's previous task starts it when it ends
  else
    start(task, now);
}

void Engine::schedule_completion(std::int32_t flow) {
  const double done = network_.completion_time(flow);
  if (std::isfinite(done))
    queue_.set(flow, done, EventKind::kFlowDone);
  else
    queue_.erase(flow);
}

// How late the event may be handled: SimulateOptions::instant of what its task spent reaching it
// (its latency, its overhead, or its flow so far), and never less than rounding. Tasks one after
// the other spend disjoint times, so a chain of them that shares no resource is late by at most
// that fraction of its own length, however late in the run it falls (SimulateOptions::instant).
double Engine::slack(const Event& event) const {
  const TaskId t{event.task};
  const double spent = event.kind == EventKind::kLatencyPaid ? model_.latency(t).value
                       : event.kind == EventKind::kOverheadPaid
                           ? model_.overhead(t).value
                           : event.time - out_.timings[at(event.task)].start.value;
  return std::max(options_.instant * spent, kCoincident * std::abs(event.time));
}

// Handles the next events that each allow being handled as late as the last of them (including
// those they cause, such as a zero-latency successor), all at the time of that last one, then
// recomputes the rates the instant changed, once. Handling an event late never lets a flow beat
// its bandwidth: a flow that ended within the instant holds its share to the end of it, and one
// that could start waits.
void Engine::run_instant() {
  double horizon = std::numeric_limits<double>::infinity();
  double now = queue_.top().time;
  while (!queue_.empty() && queue_.top().time <= horizon) {
    batch_.clear();
    while (!queue_.empty() && queue_.top().time <= horizon) {
      batch_.push_back(queue_.pop());
      horizon = std::min(horizon, batch_.back().time + slack(batch_.back()));
    }
    now = std::max(now, batch_.back().time);  // popped in time order
    for (const Event& event : batch_) {
      ++out_.events;
      handle(event, now);
    }
  }
  for (const std::int32_t flow : network_.reallocate(now)) schedule_completion(flow);
}

void Engine::report_progress() {
  if (!options_.progress) return;
  const auto now = std::chrono::steady_clock::now();
  if (std::chrono::duration<double>(now - last_progress_).count() < options_.progress_interval.value) return;
  last_progress_ = now;
  options_.progress(static_cast<double>(ended_) / static_cast<double>(model_.task_count()));
}

Result<EngineRun> Engine::run() {
  last_progress_ = std::chrono::steady_clock::now();
  for (std::int32_t t = 0; t < model_.task_count(); ++t) {
    pending_deps_[at(t)] = static_cast<std::int32_t>(model_.deps(TaskId{t}).size());
    if (pending_deps_[at(t)] == 0) become_ready(t, 0.0);
  }
  for (std::uint64_t instant = 0; !queue_.empty(); ++instant) {
    run_instant();
    if (instant % 256 == 0) report_progress();
  }
  if (ended_ != model_.task_count()) {
    // Acyclic models always end; only a flow whose rate rounded to zero can be left behind.
    std::int32_t stuck = 0;
    while (done_[at(stuck)]) ++stuck;
    return fail(ErrorCode::kInternal,
                describe_task(model_, TaskId{stuck}) + ": never ended (a flow got no bandwidth)");
  }
  out_.busy = network_.busy();
  return std::move(out_);
}

}  // namespace refit::sim
