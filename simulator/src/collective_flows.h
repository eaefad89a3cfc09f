#pragma once
// An NCCL ring collective as flows of the flow model: one flow per channel, each crossing every
// link of the ring at one rate (a ring pipelines, so its slowest link sets the pace).
#include <vector>

#include "refit/simulator/calls.h"
#include "refit/simulator/model.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

// The flow model's resources of a cluster, indexed by GPU, NIC and domain.
struct LinkResources {
  std::vector<ResourceId> nvlink_out, nvlink_in, copy;  // per GPU
  std::vector<ResourceId> nic_tx, nic_rx;               // per NIC
  std::vector<ResourceId> uplink_out, uplink_in;        // per domain; empty without oversubscription
};

struct ChannelFlow {
  std::vector<ResourceId> resources;
  Bytes bytes;  // what the channel moves over each link, inflated by the collective's efficiency
};

struct CollectiveFlows {
  std::vector<ChannelFlow> channels;
  bool crosses_network = false;
};

// The ring's links: NVLink out and in between neighbours of one domain; between domains, the
// exiting member's NIC send side and the entering member's NIC receive side (and the domains'
// uplinks when the fabric is oversubscribed). A broadcast is a chain from the root to the last
// rank; an all-gather a closed ring. Channel c leaves (enters) each domain through the NIC of
// its c-th member along the ring, so there are as many channels as the domain with the fewest
// distinct NICs on the ring has; a ring inside one domain is one flow. Each channel carries
// 1/channels of the bytes every link sees: the buffer for a broadcast, (n-1)/n of the gathered
// total for an all-gather (nccl-tests' bus bytes).
// Preconditions: at least two ranks, all placed on `cluster`, efficiency in (0, 1].
CollectiveFlows collective_flows(const Collective& collective, const PlacedCluster& cluster,
                                 const LinkResources& links);

}  // namespace refit::sim
