#pragma once
// What a component's simulation depends on, with its ranks, GPUs, NICs and domains renumbered in
// order of first appearance: two components with equal signatures build the same flow model (the
// same tasks, resources of the same capacities, in the same order) up to those names, so one
// simulation serves both. It holds, per transfer in plan order, its renumbered ends, link, bytes,
// chunk and segments (tensor, box, `via` within the component), and the boxes that both ends
// hold of each segment's tensor on either side (they decide packing and zero-copy); per rank
// first met, whether it trains and its GPU; per GPU first met, its NVLink and copy bandwidths,
// the NIC bandwidth it reaches (whether its copy engine can bind), its NIC and its domain; per
// NIC its bandwidth and latency; per domain, with an oversubscribed fabric, its uplinks' share.
// The cluster-wide NVLink latency and the tensors' specs are the same for every component.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

std::vector<std::int64_t> component_signature(const Plan& plan, std::span<const std::int32_t> ids,
                                              const ReshardProblem& problem, const PlacedCluster& cluster);

}  // namespace refit::sim
