#include "refit/simulator/max_min.h"

#include <algorithm>
#include <limits>

namespace refit::sim {
namespace {

constexpr double kUnfrozen = -1.0;

}  // namespace

void MaxMinSolver::index_flows_by_resource(std::size_t resources, std::span<const std::uint32_t> flow_begin,
                                           std::span<const std::int32_t> flow_resources) {
  by_resource_begin_.assign(resources + 1, 0);
  for (const std::int32_t r : flow_resources) ++by_resource_begin_[static_cast<std::size_t>(r) + 1];
  for (std::size_t r = 0; r < resources; ++r) by_resource_begin_[r + 1] += by_resource_begin_[r];
  by_resource_.resize(flow_resources.size());
  // Fill back to front so each resource's flows end up in increasing flow order.
  fill_cursor_.assign(by_resource_begin_.begin() + 1, by_resource_begin_.end());
  for (std::size_t f = flow_begin.size() - 1; f-- > 0;)
    for (std::uint32_t i = flow_begin[f + 1]; i-- > flow_begin[f];)
      by_resource_[--fill_cursor_[static_cast<std::size_t>(flow_resources[i])]] =
          static_cast<std::int32_t>(f);
}

// The level at which the resource fills if its unfrozen flows rise together.
double MaxMinSolver::share(std::size_t resource) const {
  return std::max(left_[resource], 0.0) / unfrozen_weight_[resource];
}

void MaxMinSolver::push_share(std::int32_t resource) {
  const auto r = static_cast<std::size_t>(resource);
  heap_.push_back({.rate = share(r), .resource = resource, .version = version_[r]});
  std::push_heap(heap_.begin(), heap_.end(), larger_share);
}

void MaxMinSolver::freeze_flows_of(std::int32_t bottleneck, std::span<const std::uint32_t> flow_begin,
                                   std::span<const std::int32_t> flow_resources) {
  const auto b = static_cast<std::size_t>(bottleneck);
  const double level = share(b);
  for (std::uint32_t i = by_resource_begin_[b]; i < by_resource_begin_[b + 1]; ++i) {
    const auto f = static_cast<std::size_t>(by_resource_[i]);
    if (rates_[f] != kUnfrozen) continue;
    rates_[f] = level * weight(f);
    bottleneck_[f] = bottleneck;
    for (std::uint32_t k = flow_begin[f]; k < flow_begin[f + 1]; ++k) {
      const std::int32_t r = flow_resources[k];
      const auto ri = static_cast<std::size_t>(r);
      left_[ri] -= rates_[f];
      --unfrozen_[ri];
      unfrozen_weight_[ri] -= weight(f);
      ++version_[ri];
      // A frozen flow leaves every other resource with at least the share it had, so shares only
      // grow: the stale, smaller entries surface first and are skipped by their version.
      if (r != bottleneck && unfrozen_[ri] > 0) push_share(r);
    }
  }
}

std::span<const double> MaxMinSolver::solve(std::span<const double> capacity,
                                            std::span<const std::uint32_t> flow_begin,
                                            std::span<const std::int32_t> flow_resources,
                                            std::span<const double> weights) {
  const std::size_t resources = capacity.size();
  const std::size_t flows = flow_begin.empty() ? 0 : flow_begin.size() - 1;
  rates_.assign(flows, kUnfrozen);
  bottleneck_.assign(flows, -1);
  if (flows == 0) return rates_;
  index_flows_by_resource(resources, flow_begin, flow_resources);
  weights_ = weights;
  left_.assign(capacity.begin(), capacity.end());
  unfrozen_.resize(resources);
  unfrozen_weight_.assign(resources, 0.0);
  for (std::size_t f = 0; f < flows; ++f)
    for (std::uint32_t k = flow_begin[f]; k < flow_begin[f + 1]; ++k)
      unfrozen_weight_[static_cast<std::size_t>(flow_resources[k])] += weight(f);
  version_.assign(resources, 0);
  heap_.clear();
  for (std::size_t r = 0; r < resources; ++r) {
    unfrozen_[r] = static_cast<std::int32_t>(by_resource_begin_[r + 1] - by_resource_begin_[r]);
    if (unfrozen_[r] > 0) push_share(static_cast<std::int32_t>(r));
  }
  while (!heap_.empty()) {
    std::pop_heap(heap_.begin(), heap_.end(), larger_share);
    const Share top = heap_.back();
    heap_.pop_back();
    const auto r = static_cast<std::size_t>(top.resource);
    if (top.version != version_[r] || unfrozen_[r] == 0) continue;
    freeze_flows_of(top.resource, flow_begin, flow_resources);
  }
  for (double& rate : rates_)
    if (rate == kUnfrozen) rate = std::numeric_limits<double>::infinity();
  return rates_;
}

}  // namespace refit::sim
