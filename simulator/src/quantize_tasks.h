#pragma once
// FP8 in flight as tasks (quantize_work.h says who quantises what): a sender that quantises
// weights does so once, in a task of its own before its first transfer of them; a landing rank's
// quantise step is a task after all it quantises has landed; a receiver that quantises what
// lands does so in a task after the last of those transfers. Each takes quantize_time() on the
// rank's GPU and moves no bytes.
#include <optional>
#include <span>
#include <vector>

#include "quantize_work.h"
#include "routes.h"
#include "task_sink.h"

namespace refit::sim {

class QuantizeTasks {
 public:
  // `plan`, `routes` and `sink` outlive the builder.
  QuantizeTasks(const Plan& plan, QuantizeWork work, const Routes& routes, TaskSink& sink);

  // Every sender's quantisation, before any transfer is added.
  void add_senders();
  // The sender's quantisation that transfer t waits for, if t carries values or scales it makes.
  std::optional<TaskId> before(const Transfer& t) const;
  // A landing rank's quantise step t (Transfer::quantises), after `deps`: it quantises the
  // source-dtype elements of the values the step makes (core/quantization.h).
  TaskId add_step(const Transfer& t, std::vector<TaskId> deps);
  // Every receiver's quantisation, after the transfers of `order` that land what it quantises;
  // `ends`: per transfer, the task after which its data is in place.
  void add_receivers(std::span<const std::int32_t> order, std::span<const TaskId> ends);

 private:
  TaskId add_task(Rank rank, Seconds time, std::vector<TaskId> deps);

  const Plan& plan_;
  QuantizeWork work_;
  const Routes& routes_;
  TaskSink& sink_;
  std::vector<TaskId> sender_task_;  // per rank: its quantisation before sending, if any
};

}  // namespace refit::sim
