#pragma once
// The cluster options shared by the commands that need a cluster (topo, plan, simulate):
// --cluster PRESET[:key=value,...] | --cluster-file F | --nccl-topo-xml F | --discover,
// plus --sysfs-root and --nvml-library to point discovery elsewhere (containers, tests).
#include <string>

#include <CLI/CLI.hpp>

#include "refit/core/error.h"
#include "refit/topology/cluster.h"

namespace refit::cli {

struct ClusterOptions {
  std::string preset;     // --cluster
  std::string file;       // --cluster-file
  std::string nccl_xml;   // --nccl-topo-xml
  bool discover = false;  // --discover
  std::string sysfs_root = "/sys";
  std::string nvml_library = "libnvidia-ml.so.1";
};

// Registers the options on `cmd`; at most one source may be given, exactly one when `required`.
// `options` must outlive the parse (keep it in the command's shared state).
void add_cluster_options(CLI::App& cmd, ClusterOptions& options, bool required = false);

// The cluster the options describe, with `placement` applied; dgx-h100 when no source is given.
// Discovery notes (no GPU, no NIC, ...) are printed on stderr. Errors name the option.
[[nodiscard]] Result<Cluster> load_cluster(const ClusterOptions& options,
                                           const RankPlacementOptions& placement);

}  // namespace refit::cli
