#pragma once
// Small hand-built clusters for tests that must not depend on the presets, with a job's training
// ranks on the first GPUs and its inference ranks right after them. Their GPUs charge refit's
// NCCL executor nothing of its own (NcclCosts{}), so that no measured figure enters a test's
// closed form unless the test puts it there.
#include <stdexcept>

#include "refit/topology/rank_map.h"

namespace refit::testing {

// `spec` with its training ranks on the first devices and its inference ranks after them.
inline PlacedCluster place_test_ranks(ClusterSpec spec, std::int32_t source_ranks,
                                      std::int32_t destination_ranks) {
  auto cluster = Cluster::make(std::move(spec)).value();
  auto ranks =
      RankMap::place(cluster, {.source_ranks = source_ranks, .destination_ranks = destination_ranks});
  if (!ranks) throw std::runtime_error("test cluster too small");
  return PlacedCluster::make(std::move(cluster), std::move(*ranks)).value();
}

// `nodes` nodes of `gpus_per_node` GPUs, each node one NVLink domain, one NIC per GPU
// (rail-optimised).
inline PlacedCluster make_test_cluster(std::int32_t nodes, std::int32_t gpus_per_node,
                                       std::int32_t source_ranks, std::int32_t destination_ranks,
                                       double nic_gbps = 50, double nvlink_gbps = 400,
                                       Bytes memory = Bytes{0}) {
  ClusterSpec s;
  s.name = "test";
  s.nvlink_latency = Seconds{5e-6};
  for (std::int32_t n = 0; n < nodes; ++n) {
    DomainSpec d{.id = n, .gpus = {}};
    for (std::int32_t k = 0; k < gpus_per_node; ++k) {
      const GpuId id{n * gpus_per_node + k};
      s.gpus.push_back(GpuSpec{.id = id,
                               .node = n,
                               .domain = n,
                               .nvlink_bandwidth = BytesPerSecond::from_gbps(nvlink_gbps),
                               .copy_bandwidth = BytesPerSecond::from_gbps(1500),
                               .memory = memory,
                               .pci_bus_id = "",
                               .nccl_costs = NcclCosts{}});
      s.nics.push_back(NicSpec{.id = id.value,
                               .name = "",
                               .node = n,
                               .bandwidth = BytesPerSecond::from_gbps(nic_gbps),
                               .latency = Seconds{15e-6},
                               .gpus = {id},
                               .pci_bus_id = ""});
      d.gpus.push_back(id);
    }
    s.domains.push_back(std::move(d));
  }
  return place_test_ranks(std::move(s), source_ranks, destination_ranks);
}

// A host as `refit calibrate` describes one: `processes` processes on one node, each a domain of
// its own without NVLink, all behind one NIC of `gbps` (shared memory) with 15 us of latency,
// each quantizing 1 GB/s of bf16.
inline PlacedCluster make_test_host(std::int32_t processes, std::int32_t source_ranks,
                                    std::int32_t destination_ranks, double gbps = 50) {
  ClusterSpec s;
  s.name = "test host";
  s.nvlink_latency = Seconds{15e-6};
  NicSpec nic{.id = 0,
              .name = "shared memory",
              .node = 0,
              .bandwidth = BytesPerSecond::from_gbps(gbps),
              .latency = Seconds{15e-6},
              .gpus = {},
              .pci_bus_id = ""};
  for (std::int32_t g = 0; g < processes; ++g) {
    s.gpus.push_back(GpuSpec{.id = GpuId{g},
                             .node = 0,
                             .domain = g,
                             .nvlink_bandwidth = BytesPerSecond{0},
                             .copy_bandwidth = BytesPerSecond::from_gbps(1500),
                             .pci_bus_id = "",
                             .quantize_bandwidth = every_scheme(BytesPerSecond::from_gbps(1)),
                             .nccl_costs = NcclCosts{}});
    s.domains.push_back(DomainSpec{.id = g, .gpus = {GpuId{g}}});
    nic.gpus.push_back(GpuId{g});
  }
  s.nics.push_back(std::move(nic));
  return place_test_ranks(std::move(s), source_ranks, destination_ranks);
}

}  // namespace refit::testing
