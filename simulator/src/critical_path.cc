#include "critical_path.h"

#include <algorithm>
#include <limits>

#include "refit/core/index.h"

namespace refit::sim {
namespace {

// A flow this much slower than alone was held back by others, not by rounding.
constexpr double kContendedSlowdown = 1e-9;

// Per resource, the flows that crossed it in the order they ended (CSR).
class CompletionsByResource {
 public:
  CompletionsByResource(const Model& model, std::span<const std::int32_t> flow_completions)
      : begin_(at(model.resource_count()) + 1, 0) {
    for (const std::int32_t t : flow_completions)
      for (const ResourceId r : model.resources(TaskId{t})) ++begin_[at(r.value) + 1];
    for (std::size_t r = 0; r + 1 < begin_.size(); ++r) begin_[r + 1] += begin_[r];
    tasks_.resize(begin_.back());
    std::vector<std::size_t> cursor(begin_.begin(), begin_.end() - 1);
    for (const std::int32_t t : flow_completions)
      for (const ResourceId r : model.resources(TaskId{t})) tasks_[cursor[at(r.value)]++] = t;
  }
  std::span<const std::int32_t> of(ResourceId r) const {
    return {tasks_.data() + begin_[at(r.value)], begin_[at(r.value) + 1] - begin_[at(r.value)]};
  }

 private:
  std::vector<std::size_t> begin_;
  std::vector<std::int32_t> tasks_;
};

bool contended(const Model& model, TaskId t, const TaskTiming& timing) {
  double slowest = std::numeric_limits<double>::infinity();
  for (const ResourceId r : model.resources(t)) slowest = std::min(slowest, model.capacity(r).value);
  const double alone = static_cast<double>(model.bytes(t).value) / slowest;
  return (timing.end - timing.start).value > alone * (1.0 + kContendedSlowdown);
}

// The flow sharing a resource with t that ended last while t was flowing, or -1.
std::int32_t last_contender(const Model& model, TaskId t, std::span<const TaskTiming> timings,
                            const CompletionsByResource& completions) {
  const TaskTiming& own = timings[at(t.value)];
  std::int32_t best = -1;
  for (const ResourceId r : model.resources(t)) {
    const auto list = completions.of(r);
    const auto first_not_before = std::partition_point(
        list.begin(), list.end(), [&](std::int32_t u) { return timings[at(u)].end < own.end; });
    if (first_not_before == list.begin()) continue;
    const std::int32_t u = *(first_not_before - 1);
    if (timings[at(u)].end > own.start && (best < 0 || timings[at(u)].end > timings[at(best)].end)) best = u;
  }
  return best;
}

// What held the task back: the stream's previous task if t's latency, paid from readiness, was
// due by the time it ended (t then went as it ended, and started an overhead later, or later
// still where its start fell inside a wider instant, SimulateOptions::instant: the due time, not
// the start, tells), else the dependency that ended last.
std::int32_t last_dependency(const Model& model, TaskId t, std::span<const TaskTiming> timings) {
  const std::int32_t previous = model.stream_previous(t);
  if (previous >= 0 && timings[at(t.value)].ready + model.latency(t) <= timings[at(previous)].end)
    return previous;
  std::int32_t best = -1;
  for (const TaskId d : model.deps(t))
    if (best < 0 || timings[at(d.value)].end > timings[at(best)].end) best = d.value;
  return best;
}

CriticalStep step_before(const Model& model, std::int32_t t, std::span<const TaskTiming> timings,
                         const CompletionsByResource& completions, std::int32_t& previous) {
  const TaskId id{t};
  if (model.bytes(id).value > 0 && contended(model, id, timings[at(t)])) {
    previous = last_contender(model, id, timings, completions);
    if (previous >= 0)
      return {.task = id, .link = CriticalLink::kContention, .from = timings[at(previous)].end};
  }
  previous = last_dependency(model, id, timings);
  if (previous >= 0)
    return {.task = id, .link = CriticalLink::kDependency, .from = timings[at(previous)].end};
  return {.task = id, .link = CriticalLink::kFirst, .from = Seconds{0.0}};
}

Breakdown break_down(const Model& model, std::span<const CriticalStep> steps,
                     std::span<const TaskTiming> timings) {
  Breakdown b;
  for (const CriticalStep& s : steps) {
    const TaskTiming& t = timings[at(s.task.value)];
    const double latency = std::max(0.0, std::min(t.end, t.start).value - std::max(s.from, t.ready).value);
    const auto category = model.category(s.task);
    if (category >= b.by_category.size()) b.by_category.resize(category + 1);
    b.latency += Seconds{latency};
    b.by_category[category] += Seconds{(t.end - s.from).value - latency};
  }
  return b;
}

}  // namespace

CriticalPath find_critical_path(const Model& model, std::span<const TaskTiming> timings,
                                std::span<const std::int32_t> flow_completions) {
  CriticalPath path;
  if (timings.empty()) return path;
  std::int32_t t = 0;
  for (std::int32_t i = 1; i < model.task_count(); ++i)
    if (timings[at(i)].end > timings[at(t)].end) t = i;
  const CompletionsByResource completions(model, flow_completions);
  // Each step moves to a task that ends strictly earlier, or to a dependency ending at the same
  // time: (end, topological order) decreases, so the walk ends.
  while (t >= 0) {
    std::int32_t previous = -1;
    path.steps.push_back(step_before(model, t, timings, completions, previous));
    t = previous;
  }
  std::reverse(path.steps.begin(), path.steps.end());
  path.breakdown = break_down(model, path.steps, timings);
  return path;
}

}  // namespace refit::sim
