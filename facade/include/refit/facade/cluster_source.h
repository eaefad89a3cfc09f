#pragma once
// Where a cluster comes from: a preset (with overrides), a cluster file, an NCCL topology dump or
// this machine's discovery. Loading it for a job sizes the hardware to hold the job (presets and
// NCCL dumps grow to as many nodes as it needs) and places the job's ranks on it, so that
// `--cluster dgx-h100` means "enough DGX H100 nodes for this job". The refit command's CLUSTER
// options and the Python package both load clusters through this.
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/topology/rank_map.h"

namespace refit {

// The preset a cluster comes from when its source names none.
inline constexpr std::string_view kDefaultPreset = "dgx-h100";

// Where a cluster comes from: exactly one of a preset, a file, an NCCL dump or discovery.
struct ClusterSource {
  std::string preset;     // PRESET[:key=value,...]; kDefaultPreset when no source is given
  std::string file;       // a cluster file (JSON, the format of refit topo --json)
  std::string nccl_xml;   // what NCCL_TOPO_DUMP_FILE wrote on one node
  bool discover = false;  // this machine, through NVML and sysfs
  // With discover: refit's GPU kernels timed on each GPU found (refit/executors/kernel_speeds.h),
  // their copy and quantize rates replacing the figures scaled from another GPU.
  bool measure = false;
  // Where discovery reads the PCI and RDMA devices.
  std::string sysfs_root = "/sys";
  // What discovery loads NVML from (dlopen).
  std::string nvml_library = "libnvidia-ml.so.1";
};

// A cluster loaded for a job, and what loading it noted.
struct LoadedCluster {
  // The hardware, sized to the job, with the job's ranks placed on it.
  PlacedCluster placed;
  std::vector<std::string> notes;  // what discovery did not find or did not use, and why
};

// The job of a problem: its training ranks on the first GPUs, its inference ranks right after.
RankPlacementOptions job_of(const ReshardProblem& problem);

// The cluster with the job placed on it; a cluster file's own placement is kept when the job
// places no rank. Errors name the option the source came from (--cluster, --cluster-file,
// --nccl-topo-xml, --discover).
[[nodiscard]] Result<LoadedCluster> load_cluster(const ClusterSource& source,
                                                 const RankPlacementOptions& job);

}  // namespace refit
