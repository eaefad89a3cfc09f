#include "flow_network.h"

#include <algorithm>
#include <cmath>
#include <limits>

namespace refit::sim {
namespace {

// Relative change below which a rate counts as unchanged. Re-solving a region recomputes kept
// capacities by subtraction, which perturbs the last bits of rates that did not really change;
// treating those as changes would grow regions and re-predict completions for nothing.
constexpr double kRateTolerance = 1e-9;
// Remaining bytes below this are rounding noise; the flow is complete.
constexpr double kEpsilonBytes = 1e-6;
// Rounds of local growth before the region is widened to whole connected components at once.
constexpr int kLocalRounds = 8;

}  // namespace

FlowNetwork::FlowNetwork(const Model& model)
    : model_(model),
      crossing_(static_cast<std::size_t>(model.resource_count())),
      slot_position_(model.resource_slot_count()),
      slot_task_(model.resource_slot_count()),
      capacity_(static_cast<std::size_t>(model.resource_count())),
      busy_(capacity_.size(), 0.0),
      busy_since_(capacity_.size(), 0.0),
      remaining_(static_cast<std::size_t>(model.task_count()), 0.0),
      rate_(remaining_.size(), 0.0),
      updated_at_(remaining_.size(), 0.0),
      version_(remaining_.size(), 0),
      is_dirty_(capacity_.size(), 0),
      region_mark_(capacity_.size(), 0),
      resource_mark_(capacity_.size(), 0),
      flow_mark_(remaining_.size(), 0),
      local_index_(capacity_.size(), 0) {
  for (std::int32_t r = 0; r < model.resource_count(); ++r)
    capacity_[index(r)] = model.capacity(ResourceId{r}).value;
  for (std::int32_t t = 0; t < model.task_count(); ++t) {
    const std::size_t first = model.resource_slot(TaskId{t});
    for (std::size_t k = 0; k < model.resources(TaskId{t}).size(); ++k) slot_task_[first + k] = t;
  }
}

void FlowNetwork::mark_dirty(std::int32_t resource) {
  if (is_dirty_[index(resource)]) return;
  is_dirty_[index(resource)] = 1;
  dirty_.push_back(resource);
}

void FlowNetwork::start(std::int32_t task, double now) {
  const auto t = index(task);
  remaining_[t] = static_cast<double>(model_.bytes(TaskId{task}).value);
  rate_[t] = 0.0;
  updated_at_[t] = now;
  const auto slot = static_cast<std::uint32_t>(model_.resource_slot(TaskId{task}));
  std::uint32_t k = 0;
  for (const ResourceId r : model_.resources(TaskId{task})) {
    auto& list = crossing_[index(r.value)];
    if (list.empty()) busy_since_[index(r.value)] = now;
    slot_position_[slot + k] = static_cast<std::uint32_t>(list.size());
    list.push_back(slot + k++);
    mark_dirty(r.value);
  }
  ++active_flows_;
}

void FlowNetwork::finish(std::int32_t task, double now) {
  const auto slot = static_cast<std::uint32_t>(model_.resource_slot(TaskId{task}));
  std::uint32_t k = 0;
  for (const ResourceId r : model_.resources(TaskId{task})) {
    auto& list = crossing_[index(r.value)];
    const std::uint32_t position = slot_position_[slot + k++];
    list[position] = list.back();
    slot_position_[list[position]] = position;
    list.pop_back();
    if (list.empty()) busy_[index(r.value)] += now - busy_since_[index(r.value)];
    mark_dirty(r.value);
  }
  ++version_[index(task)];
  --active_flows_;
}

double FlowNetwork::completion_time(std::int32_t task) const {
  const auto t = index(task);
  if (remaining_[t] <= kEpsilonBytes) return updated_at_[t];
  if (!(rate_[t] > 0.0)) return std::numeric_limits<double>::infinity();
  return updated_at_[t] + remaining_[t] / rate_[t];
}

void FlowNetwork::add_to_region(std::int32_t resource) {
  region_mark_[index(resource)] = region_id_;
  region_.push_back(resource);
}

// Every resource reachable from the region through shared flows: after this the region has no
// boundary and the next solve is the plain recomputation of the touched components.
void FlowNetwork::grow_region_to_components() {
  for (std::size_t i = 0; i < region_.size(); ++i)
    for (const std::uint32_t slot : crossing_[index(region_[i])])
      for (const ResourceId r : model_.resources(TaskId{slot_task_[slot]}))
        if (!in_region(r.value)) add_to_region(r.value);
}

void FlowNetwork::visit_resource(std::int32_t resource) {
  const auto r = index(resource);
  if (resource_mark_[r] == gather_id_) return;
  resource_mark_[r] = gather_id_;
  local_index_[r] = static_cast<std::int32_t>(local_resources_.size());
  local_resources_.push_back(resource);
}

// The flows crossing the region, as a CSR of local resource indices (the form MaxMinSolver
// takes), and every resource they cross.
void FlowNetwork::gather_region() {
  ++gather_id_;
  local_resources_.clear();
  local_flows_.clear();
  flow_begin_.assign(1, 0);
  flow_resources_.clear();
  for (const std::int32_t r : region_) {
    for (const std::uint32_t slot : crossing_[index(r)]) {
      const std::int32_t flow = slot_task_[slot];
      if (flow_mark_[index(flow)] == gather_id_) continue;
      flow_mark_[index(flow)] = gather_id_;
      local_flows_.push_back(flow);
      for (const ResourceId q : model_.resources(TaskId{flow})) {
        visit_resource(q.value);
        flow_resources_.push_back(local_index_[index(q.value)]);
      }
      flow_begin_.push_back(static_cast<std::uint32_t>(flow_resources_.size()));
    }
  }
}

// Region resources offer their whole capacity; boundary ones what the kept flows leave.
void FlowNetwork::set_boundary_capacities() {
  local_capacity_.resize(local_resources_.size());
  fastest_kept_.assign(local_resources_.size(), 0.0);
  for (std::size_t j = 0; j < local_resources_.size(); ++j) {
    const std::int32_t r = local_resources_[j];
    double kept = 0.0;
    if (!in_region(r))
      for (const std::uint32_t slot : crossing_[index(r)]) {
        const auto flow = index(slot_task_[slot]);
        if (flow_mark_[flow] == gather_id_) continue;
        kept += rate_[flow];
        fastest_kept_[j] = std::max(fastest_kept_[j], rate_[flow]);
      }
    local_capacity_[j] = std::max(0.0, capacity_[index(r)] - kept);
  }
}

bool FlowNetwork::changed(std::int32_t flow, double rate) const {
  return std::abs(rate - rate_[index(flow)]) > kRateTolerance * rate;
}

// Adds the boundary resources that break condition (a) or (b) (see the header) to the region.
bool FlowNetwork::grow_region(std::span<const double> rates,
                              std::span<const std::int32_t> bottlenecks) {
  const std::size_t before = region_.size();
  for (std::size_t i = 0; i < local_flows_.size(); ++i) {
    if (changed(local_flows_[i], rates[i]))
      for (std::uint32_t k = flow_begin_[i]; k < flow_begin_[i + 1]; ++k) {
        const std::int32_t r = local_resources_[index(flow_resources_[k])];
        if (!in_region(r)) add_to_region(r);
      }
    const std::int32_t b = bottlenecks[i];
    if (b >= 0 && !in_region(local_resources_[index(b)]) &&
        fastest_kept_[index(b)] > rates[i] * (1.0 + kRateTolerance))
      add_to_region(local_resources_[index(b)]);
  }
  return region_.size() > before;
}

void FlowNetwork::apply_rates(std::span<const double> rates, double now) {
  for (std::size_t i = 0; i < local_flows_.size(); ++i) {
    const std::int32_t flow = local_flows_[i];
    if (!changed(flow, rates[i])) continue;
    const auto f = index(flow);
    remaining_[f] = std::max(0.0, remaining_[f] - rate_[f] * (now - updated_at_[f]));
    updated_at_[f] = now;
    rate_[f] = rates[i];
    ++version_[f];
    changed_.push_back(flow);
  }
}

std::span<const std::int32_t> FlowNetwork::reallocate(double now) {
  changed_.clear();
  if (dirty_.empty()) return changed_;
  ++region_id_;
  region_.clear();
  for (const std::int32_t r : dirty_) {
    is_dirty_[index(r)] = 0;
    add_to_region(r);
  }
  dirty_.clear();
  for (int round = 1;; ++round) {
    if (round == kLocalRounds) grow_region_to_components();
    gather_region();
    set_boundary_capacities();
    const auto rates = solver_.solve(local_capacity_, flow_begin_, flow_resources_);
    if (!grow_region(rates, solver_.bottlenecks())) {
      apply_rates(rates, now);
      return changed_;
    }
  }
}

}  // namespace refit::sim
