#include "found_machine.h"

#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "cluster_builder.h"
#include "domain_grouping.h"
#include "refit/core/try.h"

namespace refit::detail {
namespace {

[[nodiscard]] Result<std::vector<std::int32_t>> group_domains(const FoundMachine& m) {
  if (m.gpus.size() > kMaxMachineDevices || m.nics.size() > kMaxMachineDevices)
    return out_of_range(
        fmt::format("{} GPUs and {} NICs in one machine: more than the {} of each refit takes", m.gpus.size(),
                    m.nics.size(), kMaxMachineDevices));
  const auto count = static_cast<std::int32_t>(m.gpus.size());
  std::map<std::string, std::int32_t> by_bus;
  for (std::int32_t g = 0; g < count; ++g) {
    const auto& gpu = m.gpus[static_cast<std::size_t>(g)];
    if (gpu.bus_id.empty()) continue;
    if (const auto [it, fresh] = by_bus.try_emplace(gpu.bus_id, g); !fresh)
      return invalid(fmt::format("{} and {}: one PCI bus id",
                                 m.gpus[static_cast<std::size_t>(it->second)].what, gpu.what));
  }
  for (const auto& gpu : m.gpus)
    if (!gpu.bus_id.empty() && std::ranges::find(gpu.peer_links, gpu.bus_id) != gpu.peer_links.end())
      return invalid(fmt::format("{}: an NVLink to itself", gpu.what));
  DomainGrouping grouping(count);
  std::map<std::string, std::int32_t> first_in_clique;
  for (std::int32_t g = 0; g < count; ++g) {
    const auto& gpu = m.gpus[static_cast<std::size_t>(g)];
    if (gpu.switch_links > 0) grouping.join_switch(g);
    for (const auto& peer : gpu.peer_links) {
      const auto it = by_bus.find(peer);
      if (it == by_bus.end())
        return not_found(fmt::format("{}: NVLink to GPU {}, which is not in this machine", gpu.what, peer));
      grouping.join(g, it->second);
    }
    if (!gpu.clique.empty()) grouping.join(first_in_clique.try_emplace(gpu.clique, g).first->second, g);
  }
  return grouping.domains();
}

void add_nics(const FoundMachine& m, ClusterSpec& spec) {
  std::vector<PciLocation> gpu_locations;
  std::vector<PciLocation> nic_locations;
  for (const auto& g : m.gpus) gpu_locations.push_back(g.location);
  for (const auto& n : m.nics) nic_locations.push_back(n.location);
  for (const auto& n : m.nics)
    spec.nics.push_back({.id = static_cast<std::int32_t>(spec.nics.size()),
                         .name = n.name,
                         .node = 0,
                         .bandwidth = hw::effective_nic_bandwidth(n.line_gigabits),
                         .latency = hw::kNetworkLatency,
                         .gpus = {},
                         .pci_bus_id = n.bus_id});
  const auto pairing = pair_gpus_with_nics(gpu_locations, nic_locations);
  for (std::size_t g = 0; g < pairing.size(); ++g)
    if (pairing[g] >= 0)
      spec.nics[static_cast<std::size_t>(pairing[g])].gpus.emplace_back(static_cast<std::int32_t>(g));
}

// How a note names `gpu`: its own name, else its model's, said to be a part not told apart where
// another part of the model was measured.
std::string part_name(const FoundGpu& gpu) {
  if (!gpu.name.empty()) return gpu.name;
  const auto& model = hw::gpu_figures(gpu.model);
  return model.kernels ? fmt::format("{} (its part not told apart)", model.name) : std::string(model.name);
}

}  // namespace

Result<ClusterSpec> machine_to_node(const FoundMachine& m, std::string name) {
  const auto domains = REFIT_TRY(group_domains(m));
  ClusterSpec spec;
  spec.name = std::move(name);
  spec.nvlink_latency = hw::kNvlinkLatency;
  for (std::size_t g = 0; g < m.gpus.size(); ++g) {
    const auto& gpu = m.gpus[g];
    const auto figures = hw::figures_of_part(gpu.model, gpu.name);
    const auto links = gpu.switch_links + static_cast<std::int32_t>(gpu.peer_links.size());
    // A GPU joined to others by its fabric clique alone (NVML listing none of its links) still
    // reaches them over NVLink: at its model's figure, said in a note.
    const bool joined = std::ranges::count(domains, domains[g]) > 1;
    if (links == 0 && joined)
      spec.assumptions.push_back(
          fmt::format("GPU {} reports no NVLink links but shares an NVLink domain with others: "
                      "taken at the {}'s NVLink, {} GB/s",
                      g, figures.name, figures.nvlink.gbps()));
    spec.gpus.push_back(
        {.id = GpuId{static_cast<std::int32_t>(g)},
         .node = 0,
         .domain = domains[g],
         .nvlink_bandwidth = links == 0 && joined ? figures.nvlink : hw::nvlink_for_links(figures, links),
         .copy_bandwidth = figures.copy,
         .pci_bus_id = gpu.bus_id,
         .quantize_bandwidth = figures.quantize,
         .nccl_costs = figures.nccl});
    if (auto note = hw::copy_assumption(figures, part_name(gpu));
        !note.empty() && std::ranges::find(spec.assumptions, note) == spec.assumptions.end())
      spec.assumptions.push_back(std::move(note));
  }
  add_nics(m, spec);
  fill_domains(spec);
  return spec;
}

}  // namespace refit::detail
