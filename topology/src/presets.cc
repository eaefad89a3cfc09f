#include "refit/topology/presets.h"

#include <algorithm>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "cluster_builder.h"
#include "hardware_constants.h"
#include "preset_params.h"
#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit {
namespace {

using detail::PresetParams;

// Rail-optimised: one compute NIC per GPU (docs/hardware.md "Systems"), the default of PresetParams.
PresetParams gpu_system(std::string name, hw::GpuModel model, std::int32_t gpus_per_node,
                        std::optional<std::int32_t> gpus_per_domain, double nic_line_gigabits) {
  const auto& figures = hw::gpu_figures(model);
  PresetParams p;
  p.name = std::move(name);
  p.gpus_per_node = gpus_per_node;
  p.gpus_per_domain = gpus_per_domain;
  p.nic = hw::effective_nic_bandwidth(nic_line_gigabits);
  p.nvlink = figures.nvlink;
  p.copy = figures.copy;
  p.quantize = figures.quantize;
  p.nccl_costs = figures.nccl;
  p.copy_assumed = hw::copy_assumption(figures);
  p.memory = figures.memory;
  p.latency = hw::kNetworkLatency;
  p.nvlink_latency = hw::kNvlinkLatency;
  return p;
}

// cpu-host: one node whose processes stand in for GPUs. They share memory, so they form one
// "NVLink" domain at memcpy speed; a loopback NIC serves them all so that the model still has
// a network path (used only if a domain size is overridden).
PresetParams cpu_host() {
  PresetParams p;
  p.name = "cpu-host";
  p.gpus_per_node = 1;
  p.nics_per_node = 1;
  p.nic_name = "loopback";
  p.nic = BytesPerSecond::from_gbps(hw::kHostLoopbackGbps);
  p.nvlink = BytesPerSecond::from_gbps(hw::kHostCopyGbps);
  p.copy = BytesPerSecond::from_gbps(hw::kHostCopyGbps);
  p.quantize = hw::host_quantize_rates();
  p.latency = hw::kHostLoopbackLatency;
  p.nvlink_latency = hw::kHostSharedMemoryLatency;
  p.one_device_per_rank = true;
  return p;
}

std::vector<PresetParams> all_presets() {
  using hw::GpuModel;
  return {
      // docs/hardware.md "Systems": the NVLink domain of a DGX is its node (std::nullopt).
      gpu_system("dgx-h100", GpuModel::kH100, 8, std::nullopt, 400),
      gpu_system("dgx-h200", GpuModel::kH200, 8, std::nullopt, 400),
      gpu_system("dgx-b200", GpuModel::kB200, 8, std::nullopt, 400),
      gpu_system("gb200-nvl72", GpuModel::kGb200, 4, 72, 400),
      gpu_system("gb300-nvl72", GpuModel::kGb300, 4, 72, 800),
      cpu_host(),
  };
}

[[nodiscard]] Result<PresetParams> find_preset(std::string_view name) {
  for (auto& p : all_presets())
    if (p.name == name) return p;
  return not_found(fmt::format("unknown preset '{}' (known: {})", name, fmt::join(preset_names(), ", ")));
}

// Whole domains when a domain spans nodes (a rack), else whole nodes; at least one.
std::int32_t node_count(const PresetParams& p, std::int32_t min_gpus) {
  if (p.nodes) return *p.nodes;
  const std::int32_t unit_gpus = std::max(p.gpus_per_node, p.domain_gpus());
  const auto units = std::max<std::int64_t>(1, ceil_div(min_gpus, unit_gpus));
  return static_cast<std::int32_t>(std::min(units * unit_gpus / p.gpus_per_node, limits::kMaxRanks + 1));
}

ClusterSpec build(const PresetParams& p, std::string name, std::int32_t nodes) {
  ClusterSpec spec;
  spec.name = std::move(name);
  spec.fabric.oversubscription = p.oversubscription;
  spec.nvlink_latency = p.nvlink_latency;
  const std::int32_t gpn = p.gpus_per_node;
  for (std::int32_t g = 0; g < nodes * gpn; ++g)
    spec.gpus.push_back({.id = GpuId{g},
                         .node = g / gpn,
                         .domain = g / p.domain_gpus(),
                         .nvlink_bandwidth = p.nvlink,
                         .copy_bandwidth = p.copy,
                         .memory = p.memory,
                         .pci_bus_id = "",
                         .quantize_bandwidth = p.quantize,
                         .nccl_costs = p.nccl_costs});
  const std::int32_t gpus_per_nic = gpn / p.node_nics();
  for (std::int32_t n = 0; n < nodes; ++n) {
    for (std::int32_t i = 0; i < p.node_nics(); ++i) {
      NicSpec nic{.id = static_cast<std::int32_t>(spec.nics.size()),
                  .name = p.nic_name.empty() ? fmt::format("rail{}", i) : p.nic_name,
                  .node = n,
                  .bandwidth = p.nic,
                  .latency = p.latency,
                  .gpus = {},
                  .pci_bus_id = "",
                  .chunk_overhead = p.chunk_overhead,
                  .transfer_overhead = p.transfer_overhead};
      for (std::int32_t k = 0; k < gpus_per_nic; ++k) nic.gpus.emplace_back(n * gpn + i * gpus_per_nic + k);
      spec.nics.push_back(std::move(nic));
    }
  }
  detail::fill_domains(spec);
  if (!p.copy_assumed.empty()) spec.assumptions.push_back(p.copy_assumed);
  return spec;
}

// The spec's parameters, overrides applied and checked.
[[nodiscard]] Result<PresetParams> params_of(std::string_view spec) {
  const auto colon = spec.find(':');
  const auto name = spec.substr(0, colon);
  auto params = REFIT_TRY(find_preset(name));
  if (colon != std::string_view::npos)
    REFIT_TRY_IN(detail::apply_overrides(params, spec.substr(colon + 1)), std::string(name));
  return params;
}

[[nodiscard]] Result<Cluster> hardware(PresetParams params, std::string_view spec, std::int32_t min_gpus) {
  if (params.one_device_per_rank) params.gpus_per_node = std::max<std::int32_t>(1, min_gpus);
  REFIT_TRY_IN(detail::check_consistency(params), params.name);
  const auto nodes = node_count(params, min_gpus);
  // Built GPU by GPU: refuse a size nobody has before allocating it.
  REFIT_TRY_IN(checked_mul(nodes, params.gpus_per_node, limits::kMaxRanks, "nodes x gpus_per_node = GPUs"),
               params.name);
  return Cluster::make(build(params, std::string(spec), nodes));
}

}  // namespace

std::vector<std::pair<std::string, std::string>> preset_keys() { return detail::override_keys(); }

std::vector<std::string> preset_names() {
  std::vector<std::string> names;
  for (const auto& p : all_presets()) names.push_back(p.name);
  return names;
}

Result<Cluster> make_preset_cluster(std::string_view spec, std::int32_t min_gpus) {
  const auto params = REFIT_TRY(params_of(spec));
  if (params.infer_offset)
    return invalid(
        fmt::format("{}: infer_offset places a job, not hardware: size the preset to the job "
                    "(size_preset_to_job, or refit's --cluster with the job's options)",
                    params.name));
  return hardware(params, spec, min_gpus);
}

Result<PlacedCluster> size_preset_to_job(std::string_view spec, const RankPlacementOptions& placement) {
  const auto params = REFIT_TRY(params_of(spec));
  RankPlacementOptions options = placement;
  if (params.infer_offset && placement.destination_offset)
    return invalid(
        fmt::format("{}: infer_offset={} and a placement option (--infer-offset {}) both place the "
                    "inference ranks: give one",
                    params.name, *params.infer_offset, *placement.destination_offset));
  if (params.infer_offset) options.destination_offset = params.infer_offset;
  REFIT_TRY(check_placement_counts(options));
  auto cluster = REFIT_TRY(hardware(params, spec, required_gpus(options)));
  auto ranks = REFIT_TRY(RankMap::place(cluster, options));
  return PlacedCluster::make(std::move(cluster), std::move(ranks));
}

}  // namespace refit
