#include "task_sink.h"

namespace refit::sim {

void TaskSink::reserve(std::size_t tasks) {
  out_.model.reserve_tasks(tasks, 4, 2);
  out_.transfer_of_task.reserve(tasks);
  out_.copy_latency.reserve(tasks);
}

void TaskSink::record(std::int32_t transfer, Seconds copy) {
  out_.transfer_of_task.push_back(transfer);
  out_.call_of_task.push_back(
      transfer >= 0 && !call_of_.empty() ? call_of_[static_cast<std::size_t>(transfer)] : call_);
  out_.copy_latency.push_back(copy);
}

TaskId TaskSink::add(std::int32_t transfer, Seconds copy) {
  record(transfer, copy);
  const TaskId task = out_.model.add_task(spec_);
  spec_.overhead = Seconds{0};  // a piece's own (transfer_tasks.cc), never the next task's
  return task;
}

TaskId TaskSink::add_call_task(std::string_view label, Bytes bytes, Seconds latency, TaskKind kind) {
  spec_.bytes = bytes;
  spec_.latency = latency;
  spec_.category = static_cast<std::uint32_t>(kind);
  spec_.label = label;
  spec_.stream = -1;
  return add(-1, Seconds{0});
}

TaskId TaskSink::add_call_task(const TaskSpec& spec) {
  record(-1, Seconds{0});
  return out_.model.add_task(spec);
}

}  // namespace refit::sim
