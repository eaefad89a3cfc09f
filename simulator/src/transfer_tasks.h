#pragma once
// A transfer as tasks (plan_model.cc says the shapes): its pieces (piece_cuts.h), each a flow on
// the resources its route crosses, the first after its data, its grant and its call, paying the
// message latency and the first chunk's pack; the last chunk's unpack a task of its own after
// them; a quantize step the landing rank's quantization (quantize_tasks.h).
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

#include "piece_cuts.h"
#include "quantize_tasks.h"
#include "refit/core/index.h"
#include "refit/lowering/plan_costs.h"
#include "routes.h"
#include "task_sink.h"
#include "transfer_mover.h"

namespace refit::sim {

class TransferTasks final : public TransferMover {
 public:
  // `costs`: per transfer (lowering::copy_costs). Every reference outlives the builder.
  TransferTasks(const lowering::LoweredPlan& lowered, std::vector<lowering::TransferCopyCost> costs,
                const Routes& routes, const PieceCuts& cuts, QuantizeTasks& quantize, TaskSink& sink);

  void add(std::span<const std::int32_t> transfers, const CallGate* gate) override;
  std::span<const TaskId> ends() const override { return ends_; }

 private:
  // A piece of a transfer: its chunks up to `chunks` (counted from 1 within it), as one task.
  struct Piece {
    std::int64_t chunks;
    TaskId task;
  };
  void add_transfer(const Transfer& t, const CallGate* gate);
  void add_quantize_step(const Transfer& t, const CallGate* gate);
  void add_pieces(const Transfer& t, Seconds pack_time, const CallGate* gate);
  void start_deps(const Transfer& t, const CallGate* gate, std::vector<TaskId>& deps);
  TaskId upstream_wait(std::int32_t upstream, std::int64_t chunks) const;
  TaskId piece_through(std::int32_t transfer, std::int64_t chunks) const;
  std::span<const Piece> pieces_of(std::int32_t transfer) const;

  const lowering::LoweredPlan& lowered_;
  std::vector<lowering::TransferCopyCost> costs_;
  const Routes& routes_;
  const PieceCuts& cuts_;
  QuantizeTasks& quantize_;
  TaskSink& sink_;
  std::vector<Piece> pieces_;                                     // of all transfers, in order
  std::vector<std::pair<std::size_t, std::size_t>> piece_range_;  // per transfer: its pieces
  std::vector<TaskId> ends_;
  std::vector<std::int64_t> ends_scratch_;
};

}  // namespace refit::sim
