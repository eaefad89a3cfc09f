#include "cluster_options.h"

#include <fmt/format.h>

#include "parse.h"
#include "refit/core/try.h"
#include "say.h"

namespace refit::cli {

void add_cluster_options(CLI::App& cmd, ClusterSource& o, bool required) {
  // A command may take another preset by default (run: cpu-host) by setting it before this.
  const std::string_view fallback = o.preset.empty() ? kDefaultPreset : std::string_view(o.preset);
  auto* group = cmd.add_option_group(
      "cluster",
      required
          ? "Where the cluster comes from (one of)"
          : fmt::format("Where the cluster comes from (one of; the {} preset when none is given)", fallback));
  group
      ->add_option(
          "--cluster", o.preset,
          "Preset, optionally with overrides: dgx-h100, dgx-h200, dgx-b200, gb200-nvl72, "
          "gb300-nvl72, cpu-host; e.g. gb200-nvl72:gpus_per_domain=64,nic_gbps=400. Sized to the job")
      ->check(non_empty());
  group->add_option("--cluster-file", o.file, "Cluster file (JSON, the format of refit topo --json)")
      ->check(non_empty());
  group->add_option("--nccl-topo-xml", o.nccl_xml, "NCCL topology dump (NCCL_TOPO_DUMP_FILE) of one node")
      ->check(non_empty());
  group->add_flag("--discover", o.discover, "Discover this machine (NVML and sysfs)");
  group->require_option(required ? 1 : 0, 1);
  auto* discover = group->get_option("--discover");
  cmd.add_option("--sysfs-root", o.sysfs_root, "Root of sysfs for --discover")->needs(discover);
  cmd.add_option("--nvml-library", o.nvml_library, "NVML library for --discover")
      ->needs(discover)
      ->check(non_empty());
  cmd.add_flag("--measure", o.measure,
               "With --discover: time refit's copy and quantize kernels and its NCCL executor's costs per "
               "operation and per step on each GPU found (a few seconds and up to 2.4 GB of device memory "
               "per GPU) and take them instead of figures from another GPU")
      ->needs(discover);
}

Result<PlacedCluster> load_cluster_for(const ClusterSource& source, const RankPlacementOptions& job) {
  if (source.preset.empty() && source.file.empty() && source.nccl_xml.empty() && !source.discover)
    say("refit: no cluster given: the {} preset (--cluster, --cluster-file, --nccl-topo-xml or "
        "--discover chooses one)\n",
        kDefaultPreset);
  auto loaded = REFIT_TRY(load_cluster(source, job));
  for (const auto& note : loaded.notes) say("refit: discover: {}\n", note);
  return std::move(loaded.placed);
}

}  // namespace refit::cli
