#include "call_tasks.h"

#include <algorithm>

#include <fmt/format.h>

#include "collective_flows.h"
#include "quantize_work.h"

#include "refit/core/index.h"

namespace refit::sim {
CallTasks::CallTasks(const Plan& plan, const CallSchedule& calls, std::span<const std::int32_t> order,
                     std::span<const std::int32_t> call_of, const PlacedCluster& cluster,
                     const Routes& routes, TransferMover& transfers, TaskSink& sink)
    : plan_(plan),
      calls_(calls),
      order_(order),
      call_of_(call_of),
      cluster_(cluster),
      routes_(routes),
      transfers_(transfers),
      sink_(sink),
      copy_task_(at(plan.world_size()), -1) {}

std::int32_t CallTasks::queue_track(std::int32_t queue) {
  if (at(queue) >= queue_track_.size()) queue_track_.resize(at(queue) + 1, -1);
  auto& track = queue_track_[at(queue)];
  if (track < 0) track = sink_.model().add_track(fmt::format("queue {}", queue));
  return track;
}

// The call's transfers in order (sorted by call, so one range).
std::span<const std::int32_t> CallTasks::order_range(std::int32_t call) const {
  const auto of = [&](std::int32_t t) { return call_of_[at(t)]; };
  const auto first = std::ranges::lower_bound(order_, call, {}, of);
  const auto last = std::ranges::upper_bound(order_, call, {}, of);
  return {first, last};
}

void CallTasks::add(std::int32_t index) {
  const Call& call = calls_.calls[at(index)];
  sink_.set_call(index);
  call_ends_.clear();
  auto& spec = sink_.spec();
  spec.track = queue_track(call.queue);
  spec.resources.clear();
  spec.deps.clear();
  if (at(call.queue) < queue_last_.size() && queue_last_[at(call.queue)] >= 0)
    spec.deps.push_back(TaskId{queue_last_[at(call.queue)]});
  for (const std::int32_t a : call.after) spec.deps.push_back(call_end_[at(a)]);
  call_start_ = sink_.add_call_task(call.label, Bytes{0}, call.launch, TaskKind::kFixed);
  add_copies_before(call);
  const auto transfers = order_range(index);
  const CallGate gate{.start = call_start_, .copy_of_rank = copy_task_};
  transfers_.add(transfers, &gate);
  for (const std::int32_t t : transfers) call_ends_.push_back(transfers_.ends()[at(t)]);
  if (call.collective) add_collective(*call.collective, call.label);
  for (const auto& c : call.copies_before) copy_task_[at(c.rank.value)] = -1;
  add_copies_after(call, index);
  spec.track = queue_track(call.queue);
  spec.resources.clear();
  spec.deps = call_ends_;
  spec.deps.push_back(call_start_);
  call_end_.push_back(sink_.add_call_task(call.label, Bytes{0}, call.finish, TaskKind::kFixed));
  if (at(call.queue) >= queue_last_.size()) queue_last_.resize(at(call.queue) + 1, -1);
  queue_last_[at(call.queue)] = call_end_.back().value;
}

// Copies before the call's bytes: each rank's after the call's start; they gate its sends.
void CallTasks::add_copies_before(const Call& call) {
  auto& spec = sink_.spec();
  for (const auto& c : call.copies_before) {
    spec.resources.assign(1, routes_.copy_engine(c.rank));
    spec.deps.assign(1, call_start_);
    spec.track = routes_.gpu_track(c.rank);
    copy_task_[at(c.rank.value)] =
        sink_.add_call_task(call.label, c.bytes, Seconds{0}, TaskKind::kPack).value;
  }
}

// After the call's bytes, each rank once all it receives in the call has landed: its
// quantizations, then its copies, which wait for them.
void CallTasks::add_copies_after(const Call& call, std::int32_t index) {
  if (call.copies_after.empty() && call.quantizes.empty()) return;
  std::vector<std::vector<TaskId>> received(at(plan_.world_size()));
  for (const std::int32_t t : order_range(index))
    received[at(plan_.transfers[at(t)].receiver.value)].push_back(transfers_.ends()[at(t)]);
  const std::vector<TaskId> collective = call.collective ? call_ends_ : std::vector<TaskId>{};
  const auto landed = [&](Rank r) {
    auto deps = call.collective ? collective : received[at(r.value)];
    deps.push_back(call_start_);
    return deps;
  };
  auto& spec = sink_.spec();
  // Per rank, only for a call that quantizes: most calls do not, and worlds are large.
  std::vector<std::vector<TaskId>> quantized(call.quantizes.empty() ? 0 : at(plan_.world_size()));
  // A rank's casts in several formats run one after the other, as its quantize tasks elsewhere do.
  for (const auto& q : call.quantizes) {
    spec.resources.clear();
    spec.deps = landed(q.rank);
    if (!quantized[at(q.rank.value)].empty()) spec.deps.push_back(quantized[at(q.rank.value)].back());
    spec.track = routes_.gpu_track(q.rank);
    quantized[at(q.rank.value)].push_back(sink_.add_call_task(
        call.label, Bytes{0}, quantize_time(q.bytes, q.scheme, routes_.gpu(q.rank)), TaskKind::kQuantize));
    call_ends_.push_back(quantized[at(q.rank.value)].back());
  }
  for (const auto& c : call.copies_after) {
    spec.resources.assign(1, routes_.copy_engine(c.rank));
    const bool after_quantizing = !quantized.empty() && !quantized[at(c.rank.value)].empty();
    spec.deps = after_quantizing ? quantized[at(c.rank.value)] : landed(c.rank);
    spec.track = routes_.gpu_track(c.rank);
    call_ends_.push_back(sink_.add_call_task(call.label, c.bytes, Seconds{0}, TaskKind::kPack));
  }
}

void CallTasks::add_collective(const Collective& collective, std::string_view label) {
  const auto flows = collective_flows(collective, cluster_, routes_.links());
  std::vector<TaskId> deps{call_start_};
  for (const Rank r : collective.ranks)
    if (const auto copy = copy_task_[at(r.value)]; copy >= 0) deps.push_back(TaskId{copy});
  auto& spec = sink_.spec();
  spec.track = routes_.gpu_track(collective.ranks.front());
  for (const auto& channel : flows.channels) {
    spec.resources = channel.resources;
    spec.deps = deps;
    call_ends_.push_back(sink_.add_call_task(label, channel.bytes, collective.latency,
                                             flows.crosses_network ? TaskKind::kNetwork : TaskKind::kNvlink));
  }
}

}  // namespace refit::sim
