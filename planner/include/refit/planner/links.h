#pragma once
// The kind of link a transfer crosses follows from where its two ranks sit on the cluster; a plan
// read from a file says it, and every cost the simulator charges follows from it, so it is checked.
#include "refit/core/error.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit {

// kLocal on one GPU, kNvlink inside one NVLink domain, kNetwork otherwise.
LinkKind link_between(const PlacedCluster& cluster, Rank a, Rank b);

// Every transfer's link is link_between its sender and receiver, and a network transfer's two
// ranks sit behind NICs; errors name the first transfer that says otherwise and both links, or
// the rank and GPU without a NIC. Precondition: the plan's ranks are in the cluster's job.
[[nodiscard]] Result<void> check_links(const Plan& plan, const PlacedCluster& cluster);

// Every network transfer's sender and receiver sit behind a NIC: a GPU without one cannot send or
// receive between domains (the simulator would have no link to charge). Errors (kMismatch) name
// the first transfer, its rank and the GPU.
[[nodiscard]] Result<void> check_network_ends(const Plan& plan, const PlacedCluster& cluster);

}  // namespace refit
