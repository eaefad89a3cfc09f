#pragma once
// A call of a CallSchedule (calls.h) as tasks: a start task (its launch cost, after the previous
// call of its queue and its `after` calls), copy tasks on the ranks' copy engines before and
// after its bytes, its transfers (each first piece after the start and its sender's copy) or its
// collective's channel flows (collective_flows.h), and an end task (its finish cost) after all
// of them.
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "refit/simulator/calls.h"
#include "routes.h"
#include "task_sink.h"
#include "transfer_mover.h"

namespace refit::sim {

class CallTasks {
 public:
  // `order`: the transfers that run, sorted by call (PieceCuts::order); `call_of` per transfer.
  // Every reference outlives the builder.
  CallTasks(const Plan& plan, const CallSchedule& calls, std::span<const std::int32_t> order,
            std::span<const std::int32_t> call_of, const PlacedCluster& cluster, const Routes& routes,
            TransferMover& transfers, TaskSink& sink);

  // Call `index`'s tasks, after every earlier call's.
  void add(std::int32_t index);

 private:
  std::span<const std::int32_t> order_range(std::int32_t call) const;
  std::int32_t queue_track(std::int32_t queue);
  void add_copies_before(const Call& call);
  void add_copies_after(const Call& call, std::int32_t index);
  void add_collective(const Collective& collective, std::string_view label);

  const Plan& plan_;
  const CallSchedule& calls_;
  std::span<const std::int32_t> order_;
  std::span<const std::int32_t> call_of_;
  const PlacedCluster& cluster_;
  const Routes& routes_;
  TransferMover& transfers_;
  TaskSink& sink_;
  std::vector<std::int32_t> queue_track_;  // per queue, -1 until its first call
  // The current call's start and what its end waits for; per call its end; per queue its last
  // call's end; per rank its copy before the current call's sends (-1: none).
  TaskId call_start_;
  std::vector<TaskId> call_ends_;
  std::vector<TaskId> call_end_;
  std::vector<std::int32_t> queue_last_;
  std::vector<std::int32_t> copy_task_;
};

}  // namespace refit::sim
