#pragma once
// FP8 in flight as tasks (quantize_work.h says who quantizes what): a sender that quantizes
// weights does so box by box, a task per box on its GPU, each after the one before, in the order
// its chunks first read them (lowering/sender_quantize_order.h), and a chunk waits only for the
// boxes its bytes come from (the last of them in that order); a landing rank's
// quantize step is a task after all it quantizes has landed; a receiver that quantizes what
// lands does so in a task after the last of those transfers. Each takes quantize_time() on the
// rank's GPU and moves no bytes. Where the execution model quantizes on the sending thread and a
// sender's puts are copies that thread makes (ExecutionModel::quantizes_on_sending_thread,
// Routes::copied_by_sender), its boxes and its puts take turns: a box is quantized when the
// first chunk reading it is next to go, after the puts the sender made since its last box. Its
// task is made then, as the transfers are added, in that chunk's pair stream, so that the chunk
// follows it by the stream's order and pays its latency while the sender quantizes, as a
// stream's messages pay theirs while the ones before them flow. Exact for a sender with one
// receiver; with several, a put made after a box it does not read does not wait for the box,
// and the boxes come in the order their transfers are added, not the pairs' paced order.
#include <array>
#include <optional>
#include <span>
#include <vector>

#include "quantize_work.h"
#include "refit/planner/execution_model.h"
#include "routes.h"
#include "task_sink.h"

namespace refit::sim {

class QuantizeTasks {
 public:
  // `plan`, `routes` and `sink` outlive the builder; `execution` runs the plan.
  QuantizeTasks(const Plan& plan, QuantizeWork work, const Routes& routes, TaskSink& sink,
                const ExecutionModel& execution);

  // Every sender's quantization, before any transfer is added; a sender whose boxes take turns
  // with its puts gets its tasks as its chunks ask for them (through()).
  void add_senders();
  // Records `piece`, a piece of transfer t just added, as a put of its sender, which the sender's
  // next box waits for where they take turns.
  void put(const Transfer& t, TaskId piece);
  // The boxes no chunk asked for of the senders that take turns, after all their puts: none
  // where every box is read by some chunk (sender_quantize_order.h), every box charged if not.
  void add_remaining_senders();
  // The sender's quantization that chunk `chunk` of transfer t waits for, if t carries values or
  // scales it makes: the task of the last box it and the chunks before it read. A sender whose
  // boxes take turns with its puts makes those not made yet now, in `stream` (t's pair stream,
  // -1 for none); none is returned where that box is in `stream`, whose order puts it first.
  std::optional<TaskId> before(const Transfer& t, std::int64_t chunk, std::int32_t stream = -1);
  // How many of t's sender's boxes chunk `chunk` of t waits for.
  std::int32_t needs(const Transfer& t, std::int64_t chunk) const {
    return work_.sender_order.needs(t.id, chunk);
  }
  // The task after which `sender` has quantized its first `boxes` boxes; none for 0. A sender
  // that takes turns makes the boxes not made yet now, in `stream`; none is returned where the
  // last is in `stream` (>= 0), whose order puts it before what asks.
  std::optional<TaskId> through(Rank sender, std::int32_t boxes, std::int32_t stream = -1);
  // Where transfer t waits for more of its sender's boxes (a piece of it starting there waits for
  // before(t, chunk)).
  std::span<const lowering::QuantizeWait> waits(std::int32_t t) const {
    return work_.sender_order.waits[static_cast<std::size_t>(t)];
  }
  // A landing rank's quantize step t (Transfer::quantizes), after `deps`: it quantizes the
  // source-dtype elements of the values the step makes (core/quantization.h).
  TaskId add_step(const Transfer& t, std::vector<TaskId> deps);
  // Every receiver's quantization, after the transfers of `order` that land what it quantizes;
  // `ends`: per transfer, the task after which its data is in place.
  void add_receivers(std::span<const std::int32_t> order, std::span<const TaskId> ends);

 private:
  TaskId add_task(Rank rank, Seconds time, std::vector<TaskId> deps, std::int32_t stream = -1);
  // What quantizing `source` (bytes per FP8 format) takes on `rank`'s GPU.
  Seconds time_of(const BytesPerScheme& source, Rank rank) const;
  // `sender`'s box tasks up to its first `boxes`, each after the one before and the puts since,
  // in `stream`.
  void add_boxes(Rank sender, std::size_t boxes, std::int32_t stream = -1);

  const Plan& plan_;
  QuantizeWork work_;
  const Routes& routes_;
  TaskSink& sink_;
  std::vector<std::vector<TaskId>> sender_tasks_;    // per rank: a task per box, in its order
  std::vector<bool> takes_turns_;                    // per rank: its boxes and puts take turns
  std::vector<std::vector<TaskId>> puts_since_box_;  // per rank that takes turns: one per stream
  TaskSpec spec_;                                    // scratch: no bytes, no resources
  fmt::memory_buffer label_;
};

}  // namespace refit::sim
