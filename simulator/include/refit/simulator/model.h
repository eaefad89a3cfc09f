#pragma once
// The description of a simulation: resources with a capacity, tasks that move bytes across
// resources after a latency and after other tasks, and trace tracks to draw them on.
// Describing work is separate from running it (simulate.h): a Model is plain data, cheap to
// build for 10^6 tasks (flat arrays, no allocation per task), and can be simulated many times.
// add_* never fail: ids, capacities and the dependency graph are checked by simulate(), which
// names the offending task or resource.
//
// Streams model a connection that sends its messages in order, pipelined: a task of a stream
// starts once its latency (counted from when it became ready, so paid while earlier messages
// flow) is paid and the stream's previous task has ended. When a stream's task ends and the
// next one is waiting on the same resources with no overhead, the flow carries on at its rate:
// handing over from message to message changes nobody's fair share, so it costs an event, not a
// recomputation of rates. A stream's flows share every resource they cross with weight
// `share_weight` (max_min.h): a resource full of streams gives each a rate in proportion to its
// weight; a task outside streams has weight 1.
// A task's overhead is the sender's own time before its data flows (LogGP's o: a put, its flush
// and notice, per chunk, and what a transfer of its own costs once). Unlike the latency it is
// paid once the task could start (its latency paid and, in a stream, the previous task ended),
// so a stream's overheads add up one after the other with its bytes instead of hiding behind
// earlier messages. Its flow stops for the overhead, so each such task costs a recomputation of
// rates where a hand-over costs none.
#include <compare>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/units.h"

namespace refit::sim {

struct ResourceId {
  std::int32_t value = 0;
  constexpr auto operator<=>(const ResourceId&) const = default;
};

struct TaskId {
  std::int32_t value = 0;
  constexpr auto operator<=>(const TaskId&) const = default;
};

// Every member has a default initializer so that designated initializers may leave any out
// (-Wextra warns otherwise): TaskSpec{.bytes = b, .resources = {tx, rx}, .deps = {t}}.
struct TaskSpec {
  Bytes bytes{};                        // 0 makes a pure latency or dependency node
  Seconds latency{};                    // paid once after the task becomes ready, before data flows
  Seconds overhead{};                   // paid after the latency and the stream's previous task
  std::vector<ResourceId> resources{};  // every resource the flow crosses; duplicates count once
  std::vector<TaskId> deps{};           // tasks that must end before this one becomes ready
  std::int32_t track = -1;              // trace track (add_track), -1 for none
  std::uint32_t category = 0;           // caller-defined, for the critical-path breakdown
  std::string_view label{};             // copied; shown in the trace
  std::int32_t stream = -1;             // add_stream(); runs after the stream's tasks added before
};

class Model {
 public:
  ResourceId add_resource(std::string name, BytesPerSecond capacity);
  std::int32_t add_track(std::string name);
  // share_weight > 0: see the top of this file.
  std::int32_t add_stream(double share_weight = 1.0);
  // Names a category in the trace; unnamed categories read "category N".
  void name_category(std::uint32_t category, std::string name);
  TaskId add_task(const TaskSpec& spec);
  void reserve_tasks(std::size_t tasks, std::size_t resources_per_task, std::size_t deps_per_task);

  std::int32_t resource_count() const { return static_cast<std::int32_t>(capacities_.size()); }
  std::int32_t task_count() const { return static_cast<std::int32_t>(tasks_.size()); }
  std::int32_t track_count() const { return static_cast<std::int32_t>(tracks_.size()); }
  std::int32_t stream_count() const { return static_cast<std::int32_t>(stream_last_.size()); }

  const std::string& resource_name(ResourceId r) const { return resource_names_[index(r)]; }
  BytesPerSecond capacity(ResourceId r) const { return capacities_[index(r)]; }
  const std::string& track_name(std::int32_t track) const { return tracks_[static_cast<std::size_t>(track)]; }
  std::string category_name(std::uint32_t category) const;

  // Spans and labels below stay valid until the model is next changed.
  Bytes bytes(TaskId t) const { return Bytes{record(t).bytes}; }
  Seconds latency(TaskId t) const { return Seconds{record(t).latency}; }
  Seconds overhead(TaskId t) const {
    return overhead_.empty() ? Seconds{0} : overhead_[static_cast<std::size_t>(t.value)];
  }
  std::int32_t track(TaskId t) const { return record(t).track; }
  std::uint32_t category(TaskId t) const { return record(t).category; }
  std::int32_t stream(TaskId t) const { return record(t).stream; }
  // The task's flow's weight in sharing a resource: its stream's, 1 outside streams.
  double share_weight(TaskId t) const {
    const auto s = record(t).stream;
    return s < 0 ? 1.0 : stream_weight_[static_cast<std::size_t>(s)];
  }
  // The task before (after) t in its stream; -1 at either end and outside streams.
  std::int32_t stream_previous(TaskId t) const { return record(t).stream_previous; }
  std::int32_t stream_next(TaskId t) const { return record(t).stream_next; }
  // The stream's first task; -1 while it has none.
  std::int32_t stream_first(std::int32_t stream) const {
    return stream_first_[static_cast<std::size_t>(stream)];
  }
  std::span<const ResourceId> resources(TaskId t) const {
    const auto begin = record(t).resources_begin;
    return {task_resources_.data() + begin,
            next_begin(t, &TaskRecord::resources_begin, task_resources_) - begin};
  }
  std::span<const TaskId> deps(TaskId t) const {
    const auto begin = record(t).deps_begin;
    return {task_deps_.data() + begin, next_begin(t, &TaskRecord::deps_begin, task_deps_) - begin};
  }
  std::string_view label(TaskId t) const { return label_text(record(t).label); }
  // Index of the first resource of task t in the concatenation of all tasks' resource lists:
  // lets the engine keep per-(task, resource) state in one flat array.
  std::size_t resource_slot(TaskId t) const { return record(t).resources_begin; }
  std::size_t resource_slot_count() const { return task_resources_.size(); }

 private:
  // A task's resources and deps end where the next task's begin (the last task's at the end of
  // the array), and tasks share a label with the task before them where it reads the same (the
  // pieces of one transfer): 48 bytes a task.
  struct TaskRecord {
    std::int64_t bytes;
    double latency;
    std::uint32_t resources_begin;
    std::uint32_t deps_begin;
    std::uint32_t label;  // index into label_ends_
    std::int32_t track;
    std::uint32_t category;
    std::int32_t stream;
    std::int32_t stream_previous;
    std::int32_t stream_next;
  };
  static std::size_t index(ResourceId r) { return static_cast<std::size_t>(r.value); }
  // Whether the task being added (its resources from task_begin on) lists `id` already.
  bool listed_already(ResourceId id, std::uint32_t task_begin);
  const TaskRecord& record(TaskId t) const { return tasks_[static_cast<std::size_t>(t.value)]; }
  template <typename T>
  std::size_t next_begin(TaskId t, std::uint32_t TaskRecord::*begin, const std::vector<T>& all) const {
    const auto next = static_cast<std::size_t>(t.value) + 1;
    return next < tasks_.size() ? tasks_[next].*begin : all.size();
  }
  std::string_view label_text(std::uint32_t label) const {
    const std::size_t begin = label == 0 ? 0 : label_ends_[label - 1];
    return std::string_view(labels_).substr(begin, label_ends_[label] - begin);
  }

  std::vector<std::string> resource_names_;
  std::vector<BytesPerSecond> capacities_;
  std::vector<std::int32_t> listed_by_;  // per resource: the last task listing it, -1 for none
  std::vector<std::string> tracks_;
  std::vector<std::string> category_names_;
  std::vector<std::int32_t> stream_first_;  // per stream: its first task, -1 for none
  std::vector<std::int32_t> stream_last_;   // per stream: its last task so far, -1 for none
  std::vector<double> stream_weight_;       // per stream: its share_weight
  std::vector<TaskRecord> tasks_;
  std::vector<ResourceId> task_resources_;
  std::vector<TaskId> task_deps_;
  // By task, once any task has an overhead (most models have none and keep it empty).
  std::vector<Seconds> overhead_;
  std::string labels_;                   // the distinct labels back to back: one allocation for 10^6 tasks
  std::vector<std::size_t> label_ends_;  // per distinct label: where it ends in labels_
};

}  // namespace refit::sim
