#pragma once
// What a plan costs on a cluster, and the time no plan can beat there.
#include <string>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit {

struct PlanStats {
  std::int64_t transfers = 0;
  std::int64_t segments = 0;
  Bytes total_bytes;
  Bytes network_bytes;
  // What the network would carry if every weight quantized at the sender or at its landing ranks
  // travelled in its source dtype and without scales (FP8 in flight): equal to network_bytes
  // without quantization.
  Bytes network_bytes_unquantized;
  Bytes nvlink_bytes;
  Bytes local_bytes;
  std::vector<Bytes> nic_tx;          // per NIC
  std::vector<Bytes> nic_rx;          // per NIC
  std::vector<Bytes> nvlink_egress;   // per GPU
  std::vector<Bytes> nvlink_ingress;  // per GPU
  std::vector<Bytes> domain_ingress;  // per domain: bytes entering it over the network
  Bytes max_nic_tx;
  Bytes max_nic_rx;
  double mean_nic_tx_bytes = 0;  // over NICs that carry traffic
  double mean_nic_rx_bytes = 0;
};

// Preconditions: the plan's ranks are placed on the cluster (make_plan checks it).
PlanStats compute_stats(const Plan& plan, const PlacedCluster& cluster);

struct LowerBound {
  Seconds time;                    // the maximum of the terms below
  std::string binding;             // which term is the maximum
  Seconds destination_domain;      // (a) max over domains: bytes from outside / the rx bw of the NICs
                                   //     of the job's ranks there (or its uplinks, if narrower)
  Seconds source_side;             // (b) unique bytes that must leave the source ranks' domains / the
                                   //     smaller of the tx bw of the job's NICs there and their uplinks
  Seconds source_domain;           // (e) max over domains: bytes only it holds that another domain
                                   //     needs / the tx bw of the job's NICs there (or its uplinks)
  Seconds source_nic;              // (d) leaving bytes whose holders' domains reach the network
                                   //     through one NIC only / that NIC's bw
  Seconds gpu_ingress;             // (c) max over GPUs: bytes needed and not held / (NVLink + NIC bw;
                                   //     NVLink alone when the job has one domain)
  Seconds gpu_egress;              // (c) max over GPUs: bytes only it holds that another GPU needs /
                                   //     the same bandwidth
  Seconds gpu_fill;                // (f) max over GPUs: every byte it needs, held there or not /
                                   //     (its copy bandwidth + the same bandwidth): what it holds
                                   //     is copied into place or comes in over a link
  std::vector<Bytes> domain_need;  // per domain: unique bytes it must receive from outside
};

LowerBound lower_bound(const ReshardProblem& problem, const PlacedCluster& cluster);
// The same of the tensors `moved` says (by problem tensor; empty: every one), for a deployment that
// moves a part of the model.
LowerBound lower_bound(const ReshardProblem& problem, const PlacedCluster& cluster,
                       const std::vector<bool>& moved);

}  // namespace refit
