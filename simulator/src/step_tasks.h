#pragma once
// The transfers as refit's NCCL executor runs them: the lowering's step schedule
// (lowering/step_schedule.h) as tasks. Each process posts one NCCL group per step on one stream,
// so a rank's chunks of step s start once its latest earlier step has ended, and a chunk moves
// once both its ranks have posted its step. Posting a step is a task of its own on the rank,
// costing the executor's time per step and per send or receive of the step (NcclCosts, of the
// rank's GPU), after the rank's previous step: an upper bound, since the executor's host posts
// up to four steps ahead, and a one-GPU measurement does not tell how much of the cost is the
// host's (which that overlaps) and how much the GPU's (which it does not). The chunks of one
// transfer in one step are one task (one flow), paying the message latency; a transfer's first
// task also pays its first chunk's pack, and its last chunk's unpack is a task of its own after
// its last (the copy stream unpacks while the next step's traffic flows). A rank's step ends
// when all its tasks of the step have (a task of no bytes after them where it has several). A quantize step
// is the landing rank's quantization in its step, before the rank's chunks of that step (they wait for the
// copy stream), and so is a sender's quantization of the boxes its chunks of the step are the first to read.
// A relay's last task waits for the end of each upstream it forwards all of (its unpacking);
// earlier data it forwards landed in earlier steps of its sender, which the steps order.
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "quantize_tasks.h"
#include "refit/core/index.h"
#include "refit/lowering/plan_costs.h"
#include "refit/lowering/step_schedule.h"
#include "routes.h"
#include "task_sink.h"
#include "transfer_mover.h"

namespace refit::sim {

// Whether a rank of the first `ranks` sits on a GPU without its NCCL executor's costs measured,
// and what such a GPU is charged then, said as a prediction's assumption.
bool nccl_costs_assumed(const PlacedCluster& cluster, std::int32_t ranks);
std::string nccl_costs_assumption();

class StepTasks final : public TransferMover {
 public:
  // `costs`: per transfer (lowering::copy_costs); `schedule`: of `lowered`. Every reference
  // outlives the builder.
  StepTasks(const lowering::LoweredPlan& lowered, lowering::StepSchedule schedule,
            std::vector<lowering::TransferCopyCost> costs, const Routes& routes, QuantizeTasks& quantize,
            TaskSink& sink);

  void add(std::span<const std::int32_t> transfers, const CallGate* gate) override;
  std::span<const TaskId> ends() const override { return ends_; }

 private:
  // The chunks [first, last] of one transfer that go in one step.
  struct StepPiece {
    std::int32_t step = 0;
    std::int32_t transfer = 0;
    std::int64_t first = 0;
    std::int64_t last = 0;
  };
  std::vector<StepPiece> pieces_of(std::span<const std::int32_t> transfers) const;
  void add_quantize_step(const Transfer& t, const CallGate* gate);
  void post_step(std::span<const StepPiece> pieces, const CallGate* gate);
  void add_piece(const StepPiece& p, const CallGate* gate);
  void piece_deps(const Transfer& t, const StepPiece& p, const CallGate* gate, std::vector<TaskId>& deps);
  void rank_does(Rank r, TaskId task);
  void end_step(std::int32_t step);

  const lowering::LoweredPlan& lowered_;
  lowering::StepSchedule schedule_;
  std::vector<lowering::TransferCopyCost> costs_;
  const Routes& routes_;
  QuantizeTasks& quantize_;
  TaskSink& sink_;
  std::vector<TaskId> ends_;                      // per transfer
  std::vector<std::optional<TaskId>> rank_last_;  // per rank: the end of its latest step
  std::vector<TaskId> rank_post_;                 // per rank: its posting of the current step
  std::vector<std::int64_t> rank_ops_;  // per rank: its sends and receives of the step; -1: it posts none
  std::vector<std::vector<TaskId>> rank_step_;        // per rank: its tasks of the current step
  std::vector<std::optional<TaskId>> rank_quantize_;  // per rank: its quantize step in the current step
  std::vector<std::int32_t> rank_boxes_;  // per rank: its boxes quantized by the end of the current step
  std::vector<std::int32_t> touched_;     // ranks with tasks in the current step
  std::vector<std::int32_t> posting_;     // ranks that post the current step
};

}  // namespace refit::sim
