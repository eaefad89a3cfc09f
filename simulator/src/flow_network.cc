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
      remaining_(static_cast<std::size_t>(model.task_count()), 0.0),
      rate_(remaining_.size(), 0.0),
      updated_at_(remaining_.size(), 0.0) {}

void FlowNetwork::start(std::int32_t task, double now) {
  const auto t = index(task);
  remaining_[t] = static_cast<double>(model_.bytes(TaskId{task}).value);
  rate_[t] = 0.0;
  updated_at_[t] = now;
  for (const ResourceId r : model_.resources(TaskId{task}))
    if (rates_.load_count(r.value) == 0) busy_since_[index(r.value)] = now;
  rates_.add(task);
}

void FlowNetwork::finish(std::int32_t task, double now) {
  rates_.remove(task);
  for (const ResourceId r : model_.resources(TaskId{task}))
    if (rates_.load_count(r.value) == 0) busy_[index(r.value)] += now - busy_since_[index(r.value)];
}

bool FlowNetwork::can_hand_over(std::int32_t from, std::int32_t to) const {
  return model_.bytes(TaskId{to}).value > 0 &&
         std::ranges::equal(model_.resources(TaskId{from}), model_.resources(TaskId{to})) &&
         model_.share_weight(TaskId{from}) == model_.share_weight(TaskId{to});
}

void FlowNetwork::hand_over(std::int32_t from, std::int32_t to, double now) {
  rates_.hand_over(from, to);
  const auto t = index(to);
  remaining_[t] = static_cast<double>(model_.bytes(TaskId{to}).value);
  rate_[t] = rate_[index(from)];
  updated_at_[t] = now;
}

double FlowNetwork::completion_time(std::int32_t task) const {
  const auto t = index(task);
  if (remaining_[t] <= kEpsilonBytes) return updated_at_[t];
  if (!(rate_[t] > 0.0)) return std::numeric_limits<double>::infinity();
  return updated_at_[t] + remaining_[t] / rate_[t];
}

std::span<const std::int32_t> FlowNetwork::reallocate(double now) {
  const auto changed = rates_.update();
  for (const std::int32_t flow : changed) {
    const auto f = index(flow);
    remaining_[f] = std::max(0.0, remaining_[f] - rate_[f] * (now - updated_at_[f]));
    updated_at_[f] = now;
    rate_[f] = rates_.rate(flow);
  }
  return changed;
}

}  // namespace refit::sim
