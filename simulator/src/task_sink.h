#pragma once
// The plan model being built (plan_model.h): the task builders add their tasks through one
// sink, which records for each task the transfer and the call it belongs to.
#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "plan_model.h"

namespace refit::sim {

class TaskSink {
 public:
  // `call_of`: per transfer its call (empty without calls), outliving the sink.
  explicit TaskSink(std::span<const std::int32_t> call_of) : call_of_(call_of) {}

  Model& model() { return out_.model; }
  // Scratch for the next task: its vectors keep their capacity from one task to the next (a
  // DeepSeek-V3 plan has 10^5 transfers).
  TaskSpec& spec() { return spec_; }
  // Scratch for the next task's label (spec().label points into it).
  fmt::memory_buffer& label() { return label_; }
  // The call that tasks belonging to no transfer are part of (-1: none).
  void set_call(std::int32_t call) { call_ = call; }
  void reserve(std::size_t tasks);

  // spec() as a task of `transfer` (-1: of the current call), `copy` of its latency a pack or unpack.
  // The spec's overhead is the task's alone: it is 0 again for the next.
  TaskId add(std::int32_t transfer, Seconds copy);
  // spec() as a task of the current call that is no transfer: its start, end, copies, collective
  // or quantization.
  TaskId add_call_task(std::string_view label, Bytes bytes, Seconds latency, TaskKind kind);
  // `spec`, a builder's own scratch instead of spec(), as a task of the current call that is no
  // transfer: for tasks a builder makes while another is filling spec() (quantize_tasks.h).
  TaskId add_call_task(const TaskSpec& spec);
  // Counts the task last added as one of `transfer` (a quantize step).
  void assign_last(std::int32_t transfer) { out_.transfer_of_task.back() = transfer; }

  PlanModel take() && { return std::move(out_); }

 private:
  // What the task about to be added belongs to.
  void record(std::int32_t transfer, Seconds copy);

  std::span<const std::int32_t> call_of_;
  PlanModel out_;
  TaskSpec spec_;
  fmt::memory_buffer label_;
  std::int32_t call_ = -1;
};

}  // namespace refit::sim
