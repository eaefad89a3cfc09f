// refit topo: show a cluster (nodes, GPUs, NVLink domains, NICs, bandwidths, rank placement), or
// print it in the cluster file format with --json.
#include <algorithm>
#include <limits>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cluster_options.h"
#include "command.h"
#include "json_text.h"
#include "parse.h"
#include "refit/core/try.h"
#include "refit/topology/cluster_json.h"

namespace refit::cli {
namespace {

struct TopoOptions {
  ClusterSource cluster;
  std::int32_t train_ranks = 0;
  std::int32_t infer_ranks = 0;
  std::int32_t infer_offset = 0;
  CLI::Option* infer_offset_option = nullptr;
  bool json = false;
};

// "0-7,16-23": runs of consecutive ids in the given order; "-" when empty.
std::string ranges(const std::vector<std::int32_t>& ids) {
  std::string out;
  for (std::size_t i = 0; i < ids.size();) {
    std::size_t j = i;
    while (j + 1 < ids.size() && ids[j + 1] == ids[j] + 1) ++j;
    out += fmt::format("{}{}", out.empty() ? "" : ",",
                       i == j ? fmt::format("{}", ids[i]) : fmt::format("{}-{}", ids[i], ids[j]));
    i = j + 1;
  }
  return out.empty() ? "-" : out;
}

std::vector<std::int32_t> values(const std::vector<GpuId>& gpus) {
  std::vector<std::int32_t> out;
  for (const auto g : gpus) out.push_back(g.value);
  return out;
}

std::string text_or_dash(const std::string& s) { return s.empty() ? "-" : s; }

// "1 node", "2 nodes".
std::string count_of(std::size_t n, std::string_view what) {
  return fmt::format("{} {}{}", n, what, n == 1 ? "" : "s");
}

void print_summary(const Cluster& c) {
  fmt::print("cluster {}: {}, {}, {}, {}\n", c.name(),
             count_of(static_cast<std::size_t>(c.node_count()), "node"), count_of(c.gpus().size(), "GPU"),
             count_of(c.domains().size(), "NVLink domain"), count_of(c.nics().size(), "NIC"));
  const double ratio = c.fabric().oversubscription;
  fmt::print("fabric: {}; NVLink latency {:g} us per message\n",
             ratio == 1.0 ? std::string("non-blocking between domains")
                          : fmt::format("oversubscribed {:g}:1 between domains", ratio),
             c.nvlink_latency().value * 1e6);
}

void print_domains(const Cluster& c) {
  fmt::print("\nNVLink domains\n{:>8}  {:<16} {:<10} {:>14} {:>14}\n", "domain", "gpus", "nodes",
             "nvlink GB/s", "NIC GB/s sum");
  for (const auto& d : c.domains()) {
    std::set<std::int32_t> nodes;
    double nvlink_min = std::numeric_limits<double>::infinity();  // the domain's slowest GPU
    for (const auto g : d.gpus) {
      nodes.insert(c.gpu(g).node);
      nvlink_min = std::min(nvlink_min, c.gpu(g).nvlink_bandwidth.gbps());
    }
    fmt::print("{:>8}  {:<16} {:<10} {:>14g} {:>14g}\n", d.id, ranges(values(d.gpus)),
               ranges({nodes.begin(), nodes.end()}), nvlink_min, c.domain_nic_bandwidth(d.id).gbps());
  }
}

void print_gpus(const Cluster& c) {
  fmt::print("\nGPUs\n{:>6} {:>6} {:>7} {:>12} {:>10} {:>5}  {}\n", "gpu", "node", "domain", "nvlink GB/s",
             "copy GB/s", "nic", "pci");
  for (const auto& g : c.gpus()) {
    const auto nic = c.nic_of(g.id);
    fmt::print("{:>6} {:>6} {:>7} {:>12g} {:>10g} {:>5}  {}\n", g.id.value, g.node, g.domain,
               g.nvlink_bandwidth.gbps(), g.copy_bandwidth.gbps(),
               nic ? fmt::format("{}", *nic) : std::string("-"), text_or_dash(g.pci_bus_id));
  }
}

void print_nics(const Cluster& c) {
  fmt::print("\nNICs\n{:>6} {:<14} {:>6} {:>8} {:>11}  {:<12} {}\n", "nic", "name", "node", "GB/s",
             "latency us", "gpus", "pci");
  for (const auto& n : c.nics())
    fmt::print("{:>6} {:<14} {:>6} {:>8g} {:>11g}  {:<12} {}\n", n.id, text_or_dash(n.name), n.node,
               n.bandwidth.gbps(), n.latency.value * 1e6, ranges(values(n.gpus)), text_or_dash(n.pci_bus_id));
  // A calibrated file's: a line each rather than a column every preset would show empty.
  for (const auto& n : c.nics()) {
    if (n.chunk_overhead.value > 0)
      fmt::print("nic {}: the sender's own time per chunk {:g} us (chunk_overhead_us)\n", n.id,
                 n.chunk_overhead.value * 1e6);
    if (n.transfer_overhead.value > 0)
      fmt::print("nic {}: the sender's own time per transfer {:g} us (transfer_overhead_us)\n", n.id,
                 n.transfer_overhead.value * 1e6);
  }
  for (const auto& k : c.spec().caches)
    fmt::print(
        "node {}: a refit whose ranks here hold at most {} bytes of shards runs in cache: NICs {:g} GB/s, "
        "latency {:g} us, {:g} us per chunk, {:g} us per transfer, copies {:g} GB/s (caches)\n",
        k.node, k.capacity.value, k.nic_bandwidth.gbps(), k.nic_latency.value * 1e6,
        k.chunk_overhead.value * 1e6, k.transfer_overhead.value * 1e6, k.copy_bandwidth.gbps());
}

void print_placement(const RankMap& c) {
  const auto gpus = values(c.gpus());
  const auto split = static_cast<std::ptrdiff_t>(c.source_ranks());
  if (gpus.empty()) {
    fmt::print("\nplacement: no ranks (give --train-ranks and --infer-ranks)\n");
    return;
  }
  fmt::print("\nplacement: {} training ranks on GPUs {}; {} inference ranks on GPUs {}\n", split,
             ranges({gpus.begin(), gpus.begin() + split}), c.rank_count() - split,
             ranges({gpus.begin() + split, gpus.end()}));
}

[[nodiscard]] Result<void> run(const TopoOptions& o) {
  RankPlacementOptions placement;
  placement.source_ranks = o.train_ranks;
  placement.destination_ranks = o.infer_ranks;
  if (o.infer_offset_option->count() > 0) placement.destination_offset = o.infer_offset;
  const auto placed = REFIT_TRY(load_cluster_for(o.cluster, placement));
  const auto& cluster = placed.cluster();
  if (o.json) {
    fmt::print("{}\n", json_text(cluster_to_json(cluster, &placed.ranks()), 2));
    return {};
  }
  print_summary(cluster);
  print_domains(cluster);
  print_gpus(cluster);
  print_nics(cluster);
  print_placement(placed.ranks());
  for (const auto& assumed : cluster.spec().assumptions) fmt::print("\nassumed: {}\n", assumed);
  return {};
}

}  // namespace

Action add_topo_command(CLI::App& app) {
  auto opts = std::make_shared<TopoOptions>();
  auto* cmd = app.add_subcommand(
      "topo", "Show a cluster: nodes, GPUs, NVLink domains, NICs, bandwidths and rank placement");
  add_cluster_options(*cmd, opts->cluster, /*required=*/true);
  cmd->add_option("--train-ranks", opts->train_ranks, "Training ranks to place (sizes presets)")
      ->check(non_negative());
  cmd->add_option("--infer-ranks", opts->infer_ranks, "Inference ranks to place (sizes presets)")
      ->check(non_negative());
  opts->infer_offset_option =
      cmd->add_option("--infer-offset", opts->infer_offset,
                      "First GPU of the inference ranks (default: right after the training ranks)")
          ->check(non_negative());
  cmd->add_flag("--json", opts->json, "Print the cluster file format (one JSON object) on stdout");
  return [opts]() { return run(*opts); };
}

}  // namespace refit::cli
