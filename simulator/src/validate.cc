#include "validate.h"

#include <cmath>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::sim {
namespace {

[[nodiscard]] Result<void> check_resources(const Model& model) {
  for (std::int32_t r = 0; r < model.resource_count(); ++r) {
    const double capacity = model.capacity(ResourceId{r}).value;
    if (!(capacity > 0.0) || !std::isfinite(capacity))
      return out_of_range(fmt::format("resource {} '{}': capacity must be positive and finite, got {} B/s", r,
                                      model.resource_name(ResourceId{r}), capacity));
  }
  return {};
}

[[nodiscard]] Result<void> check_task(const Model& model, TaskId t) {
  const auto bad = [&](ErrorCode code, std::string what) {
    return fail(code, describe_task(model, t) + ": " + what);
  };
  const std::int64_t bytes = model.bytes(t).value;
  const double latency = model.latency(t).value;
  if (bytes < 0) return bad(ErrorCode::kOutOfRange, fmt::format("negative byte count {}", bytes));
  if (!(latency >= 0.0) || !std::isfinite(latency))
    return bad(ErrorCode::kOutOfRange,
               fmt::format("latency must be finite and not negative, got {} s", latency));
  const double overhead = model.overhead(t).value;
  if (!(overhead >= 0.0) || !std::isfinite(overhead))
    return bad(ErrorCode::kOutOfRange,
               fmt::format("overhead must be finite and not negative, got {} s", overhead));
  if (bytes > 0 && model.resources(t).empty())
    return bad(ErrorCode::kInvalidArgument, fmt::format("moves {} bytes but crosses no resource", bytes));
  for (const ResourceId r : model.resources(t))
    if (r.value < 0 || r.value >= model.resource_count())
      return bad(ErrorCode::kNotFound, fmt::format("unknown resource {}", r.value));
  for (const TaskId d : model.deps(t))
    if (d.value < 0 || d.value >= model.task_count())
      return bad(ErrorCode::kNotFound, fmt::format("depends on unknown task {}", d.value));
  if (model.track(t) < -1 || model.track(t) >= model.track_count())
    return bad(ErrorCode::kNotFound, fmt::format("unknown track {}", model.track(t)));
  const std::int32_t stream = model.stream(t);
  if (stream < -1 || stream >= model.stream_count())
    return bad(ErrorCode::kNotFound, fmt::format("unknown stream {}", stream));
  // A task that named a stream before add_stream() made it was never put in its order.
  if (stream >= 0 && model.stream_previous(t) < 0 && model.stream_first(stream) != t.value)
    return bad(ErrorCode::kInvalidArgument, fmt::format("joins stream {}, which was added after it", stream));
  if (stream >= 0 && !(model.share_weight(t) > 0 && std::isfinite(model.share_weight(t))))
    return bad(ErrorCode::kOutOfRange,
               fmt::format("stream {} must have a positive, finite share weight, got {}", stream,
                           model.share_weight(t)));
  return {};
}

// Walks unfinished dependencies from a task Kahn's algorithm could not order; every task there
// waits on another unordered one, so the walk must revisit a task, and that task is on a cycle.
std::string describe_cycle(const Model& model, const std::vector<std::int32_t>& pending, std::int32_t start) {
  std::vector<std::int32_t> seen_at(static_cast<std::size_t>(model.task_count()), -1);
  std::vector<std::int32_t> walk;
  std::int32_t t = start;
  while (seen_at[static_cast<std::size_t>(t)] < 0) {
    seen_at[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(walk.size());
    walk.push_back(t);
    const std::int32_t previous = model.stream_previous(TaskId{t});
    if (previous >= 0 && pending[static_cast<std::size_t>(previous)] > 0) {
      t = previous;
      continue;
    }
    for (const TaskId d : model.deps(TaskId{t}))
      if (pending[static_cast<std::size_t>(d.value)] > 0) {
        t = d.value;
        break;
      }
  }
  std::string cycle;
  for (auto i = static_cast<std::size_t>(seen_at[static_cast<std::size_t>(t)]); i < walk.size(); ++i)
    cycle += fmt::format("{} -> ", walk[i]);
  return fmt::format("{}: dependency cycle {}{}", describe_task(model, TaskId{t}), cycle, t);
}

}  // namespace

std::string describe_task(const Model& model, TaskId task) {
  const auto label = model.label(task);
  if (label.empty()) return fmt::format("task {}", task.value);
  return fmt::format("task {} '{}'", task.value, label);
}

Result<void> check_model(const Model& model) {
  REFIT_TRY(check_resources(model));
  for (std::int32_t t = 0; t < model.task_count(); ++t) REFIT_TRY(check_task(model, TaskId{t}));
  return {};
}

Dependents build_dependents(const Model& model) {
  const auto n = static_cast<std::size_t>(model.task_count());
  Dependents g;
  g.begin.assign(n + 1, 0);
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    for (const TaskId d : model.deps(TaskId{t})) ++g.begin[static_cast<std::size_t>(d.value) + 1];
  for (std::size_t t = 0; t < n; ++t) g.begin[t + 1] += g.begin[t];
  g.tasks.resize(g.begin[n]);
  std::vector<std::uint32_t> cursor(g.begin.begin(), g.begin.end() - 1);
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    for (const TaskId d : model.deps(TaskId{t})) g.tasks[cursor[static_cast<std::size_t>(d.value)]++] = t;
  return g;
}

// A stream's task waits for its dependencies and for the task before it in the stream.
Result<void> check_acyclic(const Model& model, const Dependents& dependents) {
  std::vector<std::int32_t> pending(static_cast<std::size_t>(model.task_count()));
  std::vector<std::int32_t> ready;
  for (std::int32_t t = 0; t < model.task_count(); ++t) {
    pending[static_cast<std::size_t>(t)] = static_cast<std::int32_t>(
        model.deps(TaskId{t}).size() + (model.stream_previous(TaskId{t}) >= 0 ? 1 : 0));
    if (pending[static_cast<std::size_t>(t)] == 0) ready.push_back(t);
  }
  const auto release = [&](std::int32_t d) {
    if (--pending[static_cast<std::size_t>(d)] == 0) ready.push_back(d);
  };
  for (std::size_t i = 0; i < ready.size(); ++i) {
    for (const std::int32_t d : dependents.of(ready[i])) release(d);
    if (const std::int32_t next = model.stream_next(TaskId{ready[i]}); next >= 0) release(next);
  }
  if (ready.size() == pending.size()) return {};
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    if (pending[static_cast<std::size_t>(t)] > 0) return invalid(describe_cycle(model, pending, t));
  return {};
}

}  // namespace refit::sim
