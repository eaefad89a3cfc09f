#include "refit/topology/discovery.h"

#include <algorithm>

#include <fmt/format.h>

#include "nvml_gpus.h"
#include "refit/core/try.h"
#include "refit/topology/presets.h"
#include "sysfs_scan.h"

namespace refit {
namespace {

constexpr const char* kName = "discovered";

// No GPU: the host's processes stand in for GPUs as in the cpu-host preset; NICs found serve
// the processes in turn.
[[nodiscard]] Result<Cluster> host_cluster(const std::vector<detail::FoundNic>& nics, std::int32_t min_gpus,
                                           std::vector<std::string>& notes) {
  const auto host = REFIT_TRY(make_preset_cluster("cpu-host", min_gpus));
  ClusterSpec spec = host.spec();
  spec.name = kName;
  notes.push_back(
      fmt::format("modelled this host as {} process(es) in one shared-memory domain, as "
                  "the cpu-host preset does",
                  spec.gpus.size()));
  if (nics.empty()) return Cluster::make(std::move(spec));
  const auto loopback = spec.nics.front();
  spec.nics.clear();
  for (const auto& n : nics)
    spec.nics.push_back({.id = static_cast<std::int32_t>(spec.nics.size()),
                         .name = n.name,
                         .node = 0,
                         .bandwidth = hw::effective_nic_bandwidth(n.line_gigabits),
                         .latency = loopback.latency,
                         .gpus = {},
                         .pci_bus_id = n.bus_id});
  for (std::size_t p = 0; p < spec.gpus.size(); ++p)
    spec.nics[p % spec.nics.size()].gpus.push_back(spec.gpus[p].id);
  return Cluster::make(std::move(spec));
}

}  // namespace

Result<Discovery> discover_cluster(const DiscoveryOptions& options, std::int32_t min_gpus) {
  auto gpus = REFIT_TRY(detail::scan_nvml_gpus(options.nvml_library));
  auto nics = detail::scan_rdma_nics(options.sysfs_root);
  std::vector<std::string> notes = std::move(gpus.notes);
  notes.insert(notes.end(), nics.notes.begin(), nics.notes.end());
  if (gpus.gpus.empty()) {
    auto cluster = REFIT_TRY(host_cluster(nics.nics, min_gpus, notes));
    return Discovery{.cluster = std::move(cluster), .notes = std::move(notes)};
  }
  detail::FoundMachine machine{.gpus = std::move(gpus.gpus), .nics = std::move(nics.nics)};
  for (auto& g : machine.gpus) {
    g.location = detail::locate_pci_device(options.sysfs_root, g.bus_id);
    if (g.location.chain.empty() && !machine.nics.empty())
      notes.push_back(
          fmt::format("{}: not under {}/bus/pci/devices, paired with a NIC without PCIe "
                      "locality",
                      g.what, options.sysfs_root.string()));
  }
  auto node = REFIT_TRY(detail::machine_to_node(machine, kName));
  auto cluster = REFIT_TRY(Cluster::make(std::move(node)));
  return Discovery{.cluster = std::move(cluster), .notes = std::move(notes)};
}

}  // namespace refit
