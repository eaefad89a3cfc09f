#pragma once
// The kind of link a transfer crosses follows from where its two ranks sit on the cluster; a plan
// read from a file says it, and every cost the simulator charges follows from it, so it is checked.
#include "refit/core/error.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit {

// kLocal on one GPU, kNvlink inside one NVLink domain, kNetwork otherwise.
LinkKind link_between(const PlacedCluster& cluster, Rank a, Rank b);

// Every transfer's link is link_between its sender and receiver; errors name the first transfer
// that says otherwise and both links. Precondition: the plan's ranks are in the cluster's job.
[[nodiscard]] Result<void> check_links(const Plan& plan, const PlacedCluster& cluster);

}  // namespace refit
