#include "flow_network.h"

#include <algorithm>
#include <limits>

namespace refit::sim {
namespace {

// Remaining bytes below this are rounding noise; the flow is complete.
constexpr double kEpsilonBytes = 1e-6;

}  // namespace

FlowNetwork::FlowNetwork(const Model& model, double rate_tolerance)
    : model_(model),
      rates_(model, rate_tolerance),
      busy_(static_cast<std::size_t>(model.resource_count()), 0.0),
      busy_since_(busy_.size(), 0.0),
      progress_(static_cast<std::size_t>(model.task_count())) {}

void FlowNetwork::start(std::int32_t task, double now) {
  progress_[at(task)] = {
      .remaining = static_cast<double>(model_.bytes(TaskId{task}).value), .rate = 0.0, .updated_at = now};
  for (const ResourceId r : model_.resources(TaskId{task}))
    if (rates_.load_count(r.value) == 0) busy_since_[at(r.value)] = now;
  rates_.add(task);
}

void FlowNetwork::finish(std::int32_t task, double now) {
  rates_.remove(task);
  for (const ResourceId r : model_.resources(TaskId{task}))
    if (rates_.load_count(r.value) == 0) busy_[at(r.value)] += now - busy_since_[at(r.value)];
}

bool FlowNetwork::can_hand_over(std::int32_t from, std::int32_t to) const {
  return model_.bytes(TaskId{to}).value > 0 &&
         std::ranges::equal(model_.resources(TaskId{from}), model_.resources(TaskId{to})) &&
         model_.share_weight(TaskId{from}) == model_.share_weight(TaskId{to});
}

void FlowNetwork::hand_over(std::int32_t from, std::int32_t to, double now) {
  rates_.hand_over(from, to);
  progress_[at(to)] = {.remaining = static_cast<double>(model_.bytes(TaskId{to}).value),
                       .rate = progress_[at(from)].rate,
                       .updated_at = now};
}

double FlowNetwork::completion_time(std::int32_t task) const {
  const Progress& p = progress_[at(task)];
  if (p.remaining <= kEpsilonBytes) return p.updated_at;
  if (!(p.rate > 0.0)) return std::numeric_limits<double>::infinity();
  return p.updated_at + p.remaining / p.rate;
}

std::span<const std::int32_t> FlowNetwork::reallocate(double now) {
  const auto changed = rates_.update();
  for (const std::int32_t flow : changed) {
    Progress& p = progress_[at(flow)];
    p.remaining = std::max(0.0, p.remaining - p.rate * (now - p.updated_at));
    p.updated_at = now;
    p.rate = rates_.rate(flow);
  }
  return changed;
}

}  // namespace refit::sim
