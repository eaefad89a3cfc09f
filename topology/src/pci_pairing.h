#pragma once
// GPU-to-NIC pairing by PCIe proximity, shared by the NCCL XML importer and live discovery.
// NCCL ranks paths PIX (one PCIe switch) < PXB (several switches) < PHB (through the CPU's host
// bridge) < SYS (across CPUs); a GPU sends through the closest NIC.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace refit::detail {

// Where a device sits: the chain from its host bridge (or CPU) down through the PCIe switches to
// the device itself, and the CPU socket / NUMA node when known.
struct PciLocation {
  std::string socket;              // empty when unknown
  std::vector<std::string> chain;  // e.g. {"pci0000:00", "0000:00:01.0", "0000:01:00.0", gpu}
};

// Higher is closer: 1 + the number of chain elements shared (a shared switch beats a shared host
// bridge, a deeper shared switch beats a shallower one); 1 for the same socket only; 0 otherwise.
std::int32_t pci_proximity(const PciLocation& a, const PciLocation& b);

// For each GPU, the index of the NIC it sends through, or -1 when there is no NIC. Each GPU takes
// the closest NIC; ties go to the NIC serving the fewest GPUs so far, then the lowest index, so
// that two GPUs behind one switch with two NICs use one NIC each.
std::vector<std::int32_t> pair_gpus_with_nics(const std::vector<PciLocation>& gpus,
                                              const std::vector<PciLocation>& nics);

// "00000000:19:00.0" (NVML) or "0000:19:00.0" -> "0000:19:00.0": lower case, a 4-digit domain.
std::string normalize_bus_id(std::string_view bus_id);

}  // namespace refit::detail
