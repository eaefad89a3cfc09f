// refit._refit.PlacedCluster: a cluster loaded for a job through the front door (load_cluster),
// as the refit command's CLUSTER options load it: a preset sized to the job, a cluster file, an
// NCCL topology dump or this machine's discovery.
#include <string>
#include <utility>
#include <vector>

#include <nanobind/stl/pair.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "bindings.h"
#include "path_caster.h"
#include "refit/topology/cluster_json.h"
#include "refit/topology/presets.h"

namespace refit::python {
namespace {

using namespace nb::literals;

ClusterHandle load(const std::string& preset, const FsPath& file, const FsPath& nccl_xml, bool discover,
                   bool measure, const FsPath& sysfs_root, const FsPath& nvml_library,
                   std::int32_t source_ranks, std::int32_t destination_ranks) {
  const ClusterSource source{.preset = preset,
                             .file = file.bytes,
                             .nccl_xml = nccl_xml.bytes,
                             .discover = discover,
                             .measure = measure,
                             .sysfs_root = sysfs_root.bytes,
                             .nvml_library = nvml_library.bytes};
  const RankPlacementOptions job{.source_ranks = source_ranks, .destination_ranks = destination_ranks};
  auto cluster = unwrap([&] {
    nb::gil_scoped_release release;
    return load_cluster(source, job);
  }());
  return ClusterHandle{std::make_shared<const PlacedCluster>(std::move(cluster.placed)),
                       std::move(cluster.notes)};
}

}  // namespace

void bind_cluster(nb::module_& m) {
  nb::class_<ClusterHandle>(m, "PlacedCluster",
                            "A cluster (GPUs, NVLink domains, NICs, fabric) with a job's ranks placed on "
                            "it: training ranks on the first GPUs, inference ranks right after them.")
      .def_static(
          "load", &load, "preset"_a = "", "file"_a = FsPath{}, "nccl_xml"_a = FsPath{}, "discover"_a = false,
          "measure"_a = false, "sysfs_root"_a = FsPath{"/sys"},
          "nvml_library"_a = FsPath{"libnvidia-ml.so.1"}, "source_ranks"_a = 0, "destination_ranks"_a = 0,
          "Loads the cluster for a job of source_ranks training and destination_ranks "
          "inference ranks (0 and 0: the hardware alone, with a file's own placement). A "
          "preset grows to as many nodes as the job needs. Errors name the option the source "
          "came from (--cluster, --cluster-file, --nccl-topo-xml, --discover). measure: with discover, "
          "refit's GPU kernels timed on each GPU found (--measure).")
      .def_prop_ro(
          "name", [](const ClusterHandle& c) { return c.placed->name(); }, "The cluster's name.")
      .def_prop_ro(
          "notes", [](const ClusterHandle& c) { return c.notes; },
          "What discovery did not find or did not use, and why.")
      .def_prop_ro(
          "assumptions", [](const ClusterHandle& c) { return c.placed->cluster().spec().assumptions; },
          "What the cluster's figures assume where nothing was measured (a GPU refit's kernels have not "
          "run on), a sentence each: every prediction on it says them too.")
      .def(
          "to_json",
          [](const ClusterHandle& c) {
            return cluster_to_json(c.placed->cluster(), &c.placed->ranks()).dump();
          },
          "The cluster and its placement in the cluster file format (JSON text, as refit topo --json "
          "prints it).");
  m.def("preset_names", &preset_names, "The cluster presets: dgx-h100, dgx-h200, ...");
  m.def("preset_keys", &preset_keys, "(key, meaning) of every preset override key.");
}

}  // namespace refit::python
