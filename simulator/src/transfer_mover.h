#pragma once
// How the plan model turns the transfers of a call (or of the whole plan) into tasks: one by one,
// each pair's as a stream (TransferTasks, as refit's UCX executor and the deployed systems move
// them), or step by step (StepTasks, as refit's NCCL executor does).
#include <cstdint>
#include <span>

#include "refit/simulator/model.h"

namespace refit::sim {

// What a call adds before a transfer's first task: the call's start and, per rank, its copy
// before sending (-1: none).
struct CallGate {
  TaskId start;
  std::span<const std::int32_t> copy_of_rank;
};

class TransferMover {
 public:
  virtual ~TransferMover() = default;
  // The tasks of `transfers` (in issue order, after those of every transfer they wait for);
  // `gate` in a call, nullptr without calls.
  virtual void add(std::span<const std::int32_t> transfers, const CallGate* gate) = 0;
  // Per transfer of the plan: the task after which its data is in place (once it is added).
  virtual std::span<const TaskId> ends() const = 0;
};

}  // namespace refit::sim
