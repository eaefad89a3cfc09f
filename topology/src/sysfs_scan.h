#pragma once
// What Linux sysfs says about PCI devices and RDMA NICs, under an injectable root ("/sys"). Only
// regular files inside that tree are read, whatever its links point to.
#include <filesystem>
#include <string>
#include <vector>

#include "found_machine.h"
#include "pci_pairing.h"

namespace refit::detail {

// The PCIe chain of a device from the link <root>/bus/pci/devices/<bus id> (it points into
// <root>/devices/pci0000:00/...), and its NUMA node. Empty when the device is not there.
PciLocation locate_pci_device(const std::filesystem::path& sysfs_root, const std::string& bus_id);

struct RdmaScan {
  std::vector<FoundNic> nics;      // one per ACTIVE port, named "<device>:<port>"
  std::vector<std::string> notes;  // ports not used and why, or that there are none
};

// Reads <root>/class/infiniband/<dev>/ports/<p>/{state,rate} and the <dev>/device link.
RdmaScan scan_rdma_nics(const std::filesystem::path& sysfs_root);

}  // namespace refit::detail
