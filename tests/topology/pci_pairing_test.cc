// GPU-NIC pairing by PCIe proximity (an internal of the topology module, shared by the NCCL XML
// importer and discovery).
#include "pci_pairing.h"

#include <gtest/gtest.h>

namespace refit::detail {
namespace {

PciLocation at(std::string socket, std::vector<std::string> chain) {
  return {std::move(socket), std::move(chain)};
}

TEST(TopoPciPairing, ProximityFollowsNcclOrder) {
  // GPU under switch sw1, itself under sw0 of host bridge pci0000:00 on NUMA 0.
  const auto gpu = at("numa0", {"pci0000:00", "sw0", "sw1", "gpu"});
  const auto same_switch = at("numa0", {"pci0000:00", "sw0", "sw1", "nic"});   // PIX: 1 + 3
  const auto upper_switch = at("numa0", {"pci0000:00", "sw0", "sw2", "nic"});  // PXB: 1 + 2
  const auto host_bridge = at("numa0", {"pci0000:00", "nic"});                 // PHB: 1 + 1
  const auto same_socket = at("numa0", {"pci0000:40", "nic"});                 // PHB: 1
  const auto other_socket = at("numa1", {"pci0000:80", "nic"});                // SYS: 0
  EXPECT_EQ(pci_proximity(gpu, same_switch), 4);
  EXPECT_EQ(pci_proximity(gpu, upper_switch), 3);
  EXPECT_EQ(pci_proximity(gpu, host_bridge), 2);
  EXPECT_EQ(pci_proximity(gpu, same_socket), 1);
  EXPECT_EQ(pci_proximity(gpu, other_socket), 0);
  EXPECT_EQ(pci_proximity(at("", {"a"}), at("", {"b"})), 0);  // unknown sockets are not equal
}

TEST(TopoPciPairing, ClosestFirstThenLeastLoaded) {
  // Two GPUs and two NICs behind one switch: one NIC each. A third GPU elsewhere on the same
  // socket is as close to both (proximity 1) and both serve one GPU: the lower index wins. The
  // NIC on the other socket (proximity 0) is never chosen while a closer one exists.
  const std::vector<PciLocation> gpus = {at("s0", {"h0", "sw", "g0"}), at("s0", {"h0", "sw", "g1"}),
                                         at("s0", {"h1", "g2"})};
  const std::vector<PciLocation> nics = {at("s1", {"h9", "n0"}), at("s0", {"h0", "sw", "n1"}),
                                         at("s0", {"h0", "sw", "n2"})};
  EXPECT_EQ(pair_gpus_with_nics(gpus, nics), (std::vector<std::int32_t>{1, 2, 1}));
  EXPECT_EQ(pair_gpus_with_nics(gpus, {}), (std::vector<std::int32_t>{-1, -1, -1}));
}

TEST(TopoPciPairing, BusIdsAreNormalized) {
  EXPECT_EQ(normalize_bus_id("00000000:1A:00.0"), "0000:1a:00.0");
  EXPECT_EQ(normalize_bus_id("0000:1a:00.0"), "0000:1a:00.0");
  EXPECT_EQ(normalize_bus_id("10000:01:00.0"), "10000:01:00.0");  // a real 5-digit domain stays
}

}  // namespace
}  // namespace refit::detail
