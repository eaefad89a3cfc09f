#pragma once
// Live discovery of the machine refit runs on: GPUs, NVLink and multi-node NVLink cliques from
// NVML (loaded with dlopen, so refit needs no NVML to build), RDMA NICs from sysfs, and each GPU
// paired with the NIC that shares its deepest PCIe switch.
//
// Discovery sees one node. A machine without NVIDIA GPUs is modelled as the cpu-host preset does
// (one process per rank in one shared-memory domain) with the RDMA NICs found, or the loopback
// NIC when there are none; the notes say so plainly.
#include <filesystem>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/topology/cluster.h"

namespace refit {

struct DiscoveryOptions {
  std::filesystem::path sysfs_root = "/sys";
  std::string nvml_library = "libnvidia-ml.so.1";
};

struct Discovery {
  Cluster cluster;
  std::vector<std::string> notes;  // what was not found or not used, and why, for the user
};

// Errors: kRuntime when NVML fails midway. `min_gpus`: processes a host without GPUs models (one
// per rank of the job it runs).
[[nodiscard]] Result<Discovery> discover_cluster(const DiscoveryOptions& options, std::int32_t min_gpus = 0);

}  // namespace refit
