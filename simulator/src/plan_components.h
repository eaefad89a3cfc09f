#pragma once
// A plan's independent components: groups of transfers that share no resource of the flow model
// (routes.h: NIC tx/rx, NVLink out/in and copy engine per GPU, and a domain's uplinks when the
// fabric is oversubscribed) and no rank. Max-min sharing couples flows only through a shared
// resource and the plan's order only through a shared rank (a pair's stream, a relay's wait), so
// the components run side by side without touching each other: the plan's time is the slowest
// component's.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

// Transfer ids by component, each in plan order; components ordered by their first transfer.
std::vector<std::vector<std::int32_t>> plan_components(const Plan& plan, const PlacedCluster& cluster);

// The plan made of transfers `ids` (ascending) alone: same ranks and tensors, transfers
// renumbered in their order, each `via` pointing at its transfer's new id. Every `via` of a
// component lies inside it (a relay's feeder delivers to the relay's sender).
Plan component_plan(const Plan& plan, std::span<const std::int32_t> ids);

}  // namespace refit::sim
