#pragma once
// Clusters of the systems described in docs/hardware.md.
//
// A preset spec is "NAME" or "NAME:key=value,key=value", e.g. "gb200-nvl72:gpus_per_domain=64".
// Keys (see preset_keys() for the list with their meaning): nodes, gpus_per_node,
// gpus_per_domain, nics_per_node, nic_gbps (NIC line rate in Gb/s, as printed on the NIC),
// nvlink_gbps and copy_gbps (effective GB/s per GPU per direction), latency_us,
// chunk_overhead_us, transfer_overhead_us, nvlink_latency_us, oversubscription; and one key of
// the job rather than the hardware, infer_offset (first GPU of the inference ranks), which only
// size_preset_to_job() takes.
//
// Unless `nodes` is given, a preset has as many nodes as hold `min_gpus` GPUs, rounded up to
// whole NVLink domains (an NVL72 rack is a unit) and at least one domain.
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/topology/cluster.h"
#include "refit/topology/rank_map.h"

namespace refit {

// dgx-h100, dgx-h200, dgx-b200, gb200-nvl72, gb300-nvl72, cpu-host.
std::vector<std::string> preset_names();

// (key, meaning) for every override key, in a stable order.
std::vector<std::pair<std::string, std::string>> preset_keys();

// The preset's hardware. Errors: kNotFound for an unknown preset or key; kParse, kOutOfRange or
// kInvalidArgument naming the key for a bad override, or for infer_offset (a key of the job).
[[nodiscard]] Result<Cluster> make_preset_cluster(std::string_view spec, std::int32_t min_gpus = 0);

// A preset sized to fit a job, with the job placed on it: as many nodes as the placement needs,
// the spec's infer_offset key (when given) moving the inference ranks. This is what
// `--cluster dgx-h100` means on the command line. Errors as make_preset_cluster's.
[[nodiscard]] Result<PlacedCluster> size_preset_to_job(std::string_view spec,
                                                       const RankPlacementOptions& placement);

}  // namespace refit
