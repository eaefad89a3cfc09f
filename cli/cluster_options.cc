#include "cluster_options.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/topology/cluster_json.h"
#include "refit/topology/discovery.h"
#include "refit/topology/nccl_xml.h"
#include "refit/topology/presets.h"

namespace refit::cli {
namespace {

constexpr const char* kDefaultPreset = "dgx-h100";

[[nodiscard]] Result<Cluster> discover(const ClusterOptions& o, const RankPlacementOptions& placement) {
  const DiscoveryOptions options{.sysfs_root = o.sysfs_root, .nvml_library = o.nvml_library};
  auto found = REFIT_TRY_IN(discover_cluster(options, placement), "--discover");
  for (const auto& note : found.notes) fmt::print(stderr, "refit: discover: {}\n", note);
  return std::move(found.cluster);
}

}  // namespace

void add_cluster_options(CLI::App& cmd, ClusterOptions& o, bool required) {
  auto* group = cmd.add_option_group("cluster", "Where the cluster comes from (one of)");
  group->add_option("--cluster", o.preset,
                    "Preset, optionally with overrides: dgx-h100, dgx-h200, dgx-b200, gb200-nvl72, "
                    "gb300-nvl72, cpu-host; e.g. gb200-nvl72:gpus_per_domain=64,nic_gbps=400");
  group->add_option("--cluster-file", o.file, "Cluster file (JSON, the format of refit topo --json)");
  group->add_option("--nccl-topo-xml", o.nccl_xml, "NCCL topology dump (NCCL_TOPO_DUMP_FILE) of one node");
  group->add_flag("--discover", o.discover, "Discover this machine (NVML and sysfs)");
  group->require_option(required ? 1 : 0, 1);
  auto* discover = group->get_option("--discover");
  cmd.add_option("--sysfs-root", o.sysfs_root, "Root of sysfs for --discover")->needs(discover);
  cmd.add_option("--nvml-library", o.nvml_library, "NVML library for --discover")->needs(discover);
}

Result<Cluster> load_cluster(const ClusterOptions& o, const RankPlacementOptions& placement) {
  if (o.discover) return discover(o, placement);
  if (!o.file.empty()) return REFIT_TRY_IN(load_cluster_file(o.file, placement), "--cluster-file");
  if (!o.nccl_xml.empty())
    return REFIT_TRY_IN(load_nccl_topology_file(o.nccl_xml, placement), "--nccl-topo-xml");
  return REFIT_TRY_IN(make_preset_cluster(o.preset.empty() ? kDefaultPreset : o.preset, placement),
                      "--cluster");
}

}  // namespace refit::cli
