#include "refit/facade/cluster_source.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/registry.h"
#include "refit/topology/cluster_json.h"
#include "refit/topology/discovery.h"
#include "refit/topology/nccl_xml.h"
#include "refit/topology/presets.h"
#include "timed_kernels.h"

namespace refit {
namespace {

bool places_ranks(const RankPlacementOptions& job) {
  return job.source_ranks > 0 || job.destination_ranks > 0 || !job.explicit_gpus.empty();
}

[[nodiscard]] Result<LoadedCluster> placed(Cluster cluster, const RankPlacementOptions& job,
                                           std::vector<std::string> notes = {}) {
  auto ranks = REFIT_TRY(RankMap::place(cluster, job));
  return LoadedCluster{.placed = REFIT_TRY(PlacedCluster::make(std::move(cluster), std::move(ranks))),
                       .notes = std::move(notes)};
}

// A file's own placement is the job's when it places as many ranks of each side as the job: a
// placement the user wrote (colocated ranks, a chosen GPU order) is never silently replaced. One
// that places another job, or beside ranks placed by options, is refused naming both.
[[nodiscard]] Result<LoadedCluster> from_file(const std::string& path, const RankPlacementOptions& job) {
  auto file = REFIT_TRY(load_cluster_file(path));
  if (!file.ranks) return placed(std::move(file.cluster), job);
  const RankMap& own = *file.ranks;
  if (places_ranks(job)) {
    if (!job.explicit_gpus.empty() || job.destination_offset)
      return invalid(
          fmt::format("{}: the file's placement places the ranks already; give either it or the "
                      "options that place them",
                      path));
    if (job.source_ranks != own.source_ranks() ||
        job.destination_ranks != own.rank_count() - own.source_ranks())
      return mismatch(
          fmt::format("{}: placement: the file places {} training + {} inference ranks, the problem has "
                      "{} + {}: make the file's placement the problem's, or remove it",
                      path, own.source_ranks(), own.rank_count() - own.source_ranks(), job.source_ranks,
                      job.destination_ranks));
  }
  return LoadedCluster{
      .placed = REFIT_TRY(PlacedCluster::make(std::move(file.cluster), std::move(*file.ranks))), .notes = {}};
}

[[nodiscard]] Result<LoadedCluster> from_xml(const std::string& path, const RankPlacementOptions& job) {
  return placed(REFIT_TRY(load_nccl_topology_file(path, required_gpus(job))), job);
}

[[nodiscard]] Result<LoadedCluster> discovered(const ClusterSource& s, const RankPlacementOptions& job) {
  const DiscoveryOptions options{.sysfs_root = s.sysfs_root, .nvml_library = s.nvml_library};
  auto found = REFIT_TRY(discover_cluster(options, required_gpus(job)));
  if (!s.measure) return placed(std::move(found.cluster), job, std::move(found.notes));
  const KernelTimer timer = [](std::string_view bus) { return time_gpu_kernels(bus, KernelTiming{}); };
  auto spec = REFIT_TRY_IN(with_timed_kernels(found.cluster.spec(), timer, found.notes), "--measure");
  return placed(REFIT_TRY(Cluster::make(std::move(spec))), job, std::move(found.notes));
}

}  // namespace

RankPlacementOptions job_of(const ReshardProblem& problem) {
  return RankPlacementOptions{.source_ranks = problem.source_ranks(),
                              .destination_ranks = problem.destination_ranks()};
}

Result<LoadedCluster> load_cluster(const ClusterSource& s, const RankPlacementOptions& job) {
  if (s.measure && !s.discover)
    return invalid("--measure times the GPUs of this machine: it needs --discover");
  if (s.discover) return REFIT_TRY_IN(discovered(s, job), "--discover");
  if (!s.file.empty()) return REFIT_TRY_IN(from_file(s.file, job), "--cluster-file");
  if (!s.nccl_xml.empty()) return REFIT_TRY_IN(from_xml(s.nccl_xml, job), "--nccl-topo-xml");
  const auto sized =
      REFIT_TRY_IN(size_preset_to_job(s.preset.empty() ? kDefaultPreset : s.preset, job), "--cluster");
  return LoadedCluster{.placed = sized, .notes = {}};
}

}  // namespace refit
