#pragma once
// FP8 in flight as tasks (quantize_work.h says who quantises what): a sender that quantises
// weights does so box by box, a task per box on its GPU, each after the one before, in the order
// its chunks first read them (lowering/sender_quantize_order.h), and a chunk waits only for the
// boxes its bytes come from (the last of them in that order); a landing rank's
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
  // The sender's quantisation that chunk `chunk` of transfer t waits for, if t carries values or
  // scales it makes: the task of the last box it and the chunks before it read.
  std::optional<TaskId> before(const Transfer& t, std::int64_t chunk) const;
  // How many of t's sender's boxes chunk `chunk` of t waits for.
  std::int32_t needs(const Transfer& t, std::int64_t chunk) const {
    return work_.sender_order.needs(t.id, chunk);
  }
  // The task after which `sender` has quantised its first `boxes` boxes; none for 0.
  std::optional<TaskId> through(Rank sender, std::int32_t boxes) const;
  // Where transfer t waits for more of its sender's boxes (a piece of it starting there waits for
  // before(t, chunk)).
  std::span<const lowering::QuantizeWait> waits(std::int32_t t) const {
    return work_.sender_order.waits[static_cast<std::size_t>(t)];
  }
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
  std::vector<std::vector<TaskId>> sender_tasks_;  // per rank: a task per box, in its order
};

}  // namespace refit::sim
