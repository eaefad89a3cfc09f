#pragma once
// The CLUSTER options shared by the commands that need a cluster (topo, plan, simulate, run),
// registered onto a ClusterSource that the facade loads (refit/facade/cluster_source.h):
// --cluster PRESET[:key=value,...] | --cluster-file F | --nccl-topo-xml F | --discover, plus
// --sysfs-root and --nvml-library to point discovery elsewhere (containers, tests).
#include <CLI/CLI.hpp>

#include "refit/core/error.h"
#include "refit/facade/cluster_source.h"

namespace refit::cli {

// Registers the options on `cmd`; at most one source may be given, exactly one when `required`.
// `source` must outlive the parse (keep it in the command's shared state).
void add_cluster_options(CLI::App& cmd, ClusterSource& source, bool required = false);

// The facade's load_cluster, with discovery's notes printed on stderr.
[[nodiscard]] Result<PlacedCluster> load_cluster_for(const ClusterSource& source,
                                                     const RankPlacementOptions& job);

}  // namespace refit::cli
