#include "refit/simulator/model.h"

#include <algorithm>

#include <fmt/format.h>

namespace refit::sim {

ResourceId Model::add_resource(std::string name, BytesPerSecond capacity) {
  resource_names_.push_back(std::move(name));
  capacities_.push_back(capacity);
  listed_by_.push_back(-1);
  return ResourceId{resource_count() - 1};
}

std::int32_t Model::add_track(std::string name) {
  tracks_.push_back(std::move(name));
  return track_count() - 1;
}

std::int32_t Model::add_stream(double share_weight) {
  stream_first_.push_back(-1);
  stream_last_.push_back(-1);
  stream_weight_.push_back(share_weight);
  return stream_count() - 1;
}

void Model::name_category(std::uint32_t category, std::string name) {
  if (category >= category_names_.size()) category_names_.resize(category + 1);
  category_names_[category] = std::move(name);
}

std::string Model::category_name(std::uint32_t category) const {
  if (category < category_names_.size() && !category_names_[category].empty())
    return category_names_[category];
  return fmt::format("category {}", category);
}

// A flow loads each resource once however often the caller lists it. A collective's channel
// crosses hundreds of resources, so a known resource remembers the task that listed it last; an
// unknown one (left for check_model to name) is looked for among the task's.
bool Model::listed_already(ResourceId id, std::uint32_t task_begin) {
  if (id.value < 0 || id.value >= resource_count())
    return std::find(task_resources_.begin() + task_begin, task_resources_.end(), id) !=
           task_resources_.end();
  auto& by = listed_by_[index(id)];
  if (by == task_count()) return true;
  by = task_count();
  return false;
}

TaskId Model::add_task(const TaskSpec& spec) {
  TaskRecord r{};
  r.bytes = spec.bytes.value;
  r.latency = spec.latency.value;
  r.resources_begin = static_cast<std::uint32_t>(task_resources_.size());
  for (const ResourceId id : spec.resources)
    if (!listed_already(id, r.resources_begin)) task_resources_.push_back(id);
  r.deps_begin = static_cast<std::uint32_t>(task_deps_.size());
  task_deps_.insert(task_deps_.end(), spec.deps.begin(), spec.deps.end());
  if (label_ends_.empty() || label_text(static_cast<std::uint32_t>(label_ends_.size() - 1)) != spec.label) {
    labels_.append(spec.label);
    label_ends_.push_back(labels_.size());
  }
  r.label = static_cast<std::uint32_t>(label_ends_.size() - 1);
  r.track = spec.track;
  r.category = spec.category;
  r.stream = spec.stream;
  r.stream_previous = -1;
  r.stream_next = -1;
  // An unknown stream is left for check_model to name.
  if (spec.stream >= 0 && spec.stream < stream_count()) {
    auto& last = stream_last_[static_cast<std::size_t>(spec.stream)];
    r.stream_previous = last;
    if (last >= 0)
      tasks_[static_cast<std::size_t>(last)].stream_next = task_count();
    else
      stream_first_[static_cast<std::size_t>(spec.stream)] = task_count();
    last = task_count();
  }
  if (spec.overhead.value != 0 || !overhead_.empty()) {
    overhead_.resize(tasks_.size());  // the tasks before the first with an overhead have none
    overhead_.push_back(spec.overhead);
  }
  tasks_.push_back(r);
  return TaskId{task_count() - 1};
}

void Model::reserve_tasks(std::size_t tasks, std::size_t resources_per_task, std::size_t deps_per_task) {
  tasks_.reserve(tasks);
  task_resources_.reserve(tasks * resources_per_task);
  task_deps_.reserve(tasks * deps_per_task);
}

}  // namespace refit::sim
