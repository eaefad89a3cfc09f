#pragma once
// NCCL's own latency model of one collective call (src/graph/tuning.cc), which NCCL uses to pick
// an algorithm and protocol: a published, microbenchmark-derived model, quoted with its source in
// docs/hardware.md ("Collective costs and per-call overheads"). Bandwidth is not here: the flow
// model moves a collective's bytes over the links it crosses (collective_flows).
#include <cstdint>

#include "refit/core/units.h"

namespace refit {

// tuning.cc's constants, protocol Simple unless named LL (the low-latency protocol NCCL picks for
// small messages such as a barrier's).
struct NcclLatencies {
  Seconds base{8.4e-6};              // baseLatencies, Ring and Tree, Simple
  Seconds base_ll_tree{6.8e-6};      // baseLatencies, Tree, LL
  Seconds nvlink_hop{4.0e-6};        // hwLatencies NVLINK, Tree, Simple: a broadcast's hop
  Seconds nvlink_ring_step{3.4e-6};  // hwLatencies NVLINK, Ring, Simple
  Seconds network_hop{14.0e-6};      // hwLatencies NET, Ring and Tree, Simple
  Seconds network_overhead{3e-6};    // getNetOverhead: 1 us per inter-node step, x3 for Simple
  Seconds nvlink_ll_tree{0.6e-6};    // hwLatencies NVLINK, Tree, LL
  Seconds network_ll_tree{5.0e-6};   // hwLatencies NET, Tree, LL
};

// A communicator as the model sees it: its ranks and over how many NVLink domains they spread
// (NCCL's nNodes: a multi-node NVLink domain counts as one).
struct RingShape {
  std::int32_t ranks = 1;
  std::int32_t domains = 1;
};

// Ring broadcast: base + one hop, the hop of the network when the ring leaves a domain. NCCL
// charges one hop when its ring channels are the same ("sameChannels") and one per rank
// otherwise; we take the first (docs/hardware.md gives the arithmetic of both).
Seconds broadcast_latency(const NcclLatencies& l, RingShape s);
// Ring all-gather: base + (n-1-inter) intra-domain steps, each the larger of the NVLink step and
// the network post overhead when the ring leaves a domain, + one network hop per domain crossed.
Seconds all_gather_latency(const NcclLatencies& l, RingShape s);
// A barrier over the communicator, costed as NCCL's smallest all-reduce: Tree, LL,
// base + 2((n/domains - 1) NVLink hops + log2(domains) network hops).
Seconds barrier_latency(const NcclLatencies& l, RingShape s);

}  // namespace refit
