#pragma once
// Clusters of the systems described in reference/hardware.md, sized to the job.
//
// A preset spec is "NAME" or "NAME:key=value,key=value", e.g. "gb200-nvl72:gpus_per_domain=64".
// Keys (see preset_keys() for the list with their meaning): nodes, gpus_per_node,
// gpus_per_domain, nics_per_node, nic_gbps (NIC line rate in Gb/s, as printed on the NIC),
// nvlink_gbps and copy_gbps (effective GB/s per GPU per direction), latency_us,
// nvlink_latency_us, oversubscription, infer_offset (first GPU of the inference ranks).
//
// Unless `nodes` is given, a preset has as many nodes as the placement needs, rounded up to whole
// NVLink domains (an NVL72 rack is a unit) and at least one domain.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/topology/cluster.h"

namespace refit {

// dgx-h100, dgx-h200, dgx-b200, gb200-nvl72, gb300-nvl72, cpu-host.
std::vector<std::string> preset_names();

// (key, meaning) for every override key, in a stable order.
std::vector<std::pair<std::string, std::string>> preset_keys();

// Errors: kNotFound for an unknown preset or key; kParse, kOutOfRange or kInvalidArgument naming the
// key for a bad override; kMismatch when the cluster is too small for the placement.
// `placement.destination_offset` is overridden by the infer_offset key when given.
[[nodiscard]] Result<Cluster> make_preset_cluster(std::string_view spec,
                                                  const RankPlacementOptions& placement);

}  // namespace refit
