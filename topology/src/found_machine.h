#pragma once
// One machine as an importer or discovery found it (GPUs with their NVLinks, NICs, PCIe
// locations), turned into a one-node cluster description by the same rules for every source.
#include <cstdint>
#include <string>
#include <vector>

#include "hardware_constants.h"
#include "pci_pairing.h"
#include "refit/topology/cluster.h"

namespace refit::detail {

// GPUs, and NICs, one machine may have: a node has 8 GPUs, 4 on a GB200 tray; more is a dump or
// a driver gone wrong.
inline constexpr std::size_t kMaxMachineDevices = 1024;

struct FoundGpu {
  std::string what;    // how errors name it, e.g. "line 12: <gpu dev=\"3\">"
  std::string bus_id;  // normalized; may be empty
  hw::GpuModel model = hw::GpuModel::kH100;
  std::string name;  // as the GPU names itself (NVML), or as its PCI device id tells; empty: unknown
  std::int32_t switch_links = 0;        // NVLinks to NVSwitches
  std::vector<std::string> peer_links;  // bus id of the GPU at the end of each direct NVLink
  std::string clique;                   // multi-node NVLink clique; empty when none
  PciLocation location;
};

struct FoundNic {
  std::string name;
  double line_gigabits = 0;  // line rate, Gb/s
  std::string bus_id;
  PciLocation location;
};

struct FoundMachine {
  std::vector<FoundGpu> gpus;
  std::vector<FoundNic> nics;
};

// A one-node ClusterSpec (node 0, no placement): NVLink domains from the links and cliques,
// NVLink bandwidth from the link count, NICs paired with GPUs by PCIe proximity. Errors when a
// direct NVLink leads to a GPU that is not in the machine.
[[nodiscard]] Result<ClusterSpec> machine_to_node(const FoundMachine& machine, std::string name);

}  // namespace refit::detail
