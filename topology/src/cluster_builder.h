#pragma once
// Steps shared by the ways of making a cluster (presets, NCCL XML, discovery): derive the domain
// list from the GPUs and copy a described machine to make more nodes.
#include <cstdint>

#include "refit/topology/cluster.h"

namespace refit::detail {

// Rebuilds spec.domains from gpus[i].domain, which must be dense (0..D-1).
void fill_domains(ClusterSpec& spec);

// A cluster of `count` copies of the one-node `node` (node 0): GPU, NIC, domain ids and node
// numbers are offset per copy, and each copy's domains are its own.
ClusterSpec replicate_node(const ClusterSpec& node, std::int32_t count);

// The number of identical nodes of `gpus_per_node` GPUs that hold `gpus` GPUs, at least one.
std::int32_t nodes_for(std::int32_t gpus, std::int32_t gpus_per_node);

}  // namespace refit::detail
