#pragma once
// Import of the topology NCCL writes with NCCL_TOPO_DUMP_FILE=topo.xml: <system><cpu><pci>...
// trees holding <gpu dev= sm=> elements with <nvlink target= count= tclass=> children and
// <nic><net name= speed= (Mb/s) port=> elements.
//
// The file describes one machine. GPUs keep NCCL's device order (dev); GPUs linked to NVSwitches
// (tclass 0x068000) form one NVLink domain, GPUs linked directly share a domain, a GPU without
// NVLink is a domain of its own. NVLink bandwidth is NCCL's per-link constant times the link
// count. Every <net> is a NIC (effective bandwidth from its line rate); each GPU sends through the
// closest NIC in the PCIe tree (same switch first), so storage NICs under the CPU serve no GPU
// while a NIC under a GPU's switch exists. The cluster is as many copies of the machine as hold
// `min_gpus` GPUs (at least one).
#include <filesystem>
#include <string_view>

#include "refit/core/error.h"
#include "refit/topology/cluster.h"

namespace refit {

// Errors name the XML line and element ("line 12: <gpu dev=\"3\">: attribute 'sm' missing").
[[nodiscard]] Result<Cluster> import_nccl_topology(std::string_view xml, std::string_view name,
                                                   std::int32_t min_gpus = 0);
// The cluster is named after the file.
[[nodiscard]] Result<Cluster> load_nccl_topology_file(const std::filesystem::path& path,
                                                      std::int32_t min_gpus = 0);

}  // namespace refit
