#include "refit/topology/cache_regime.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {
namespace {

// Adds each rank's box of `layout` to its node's bytes, at `element` bytes an element.
void add_shards(const Layout& layout, std::int64_t element, const PlacedCluster& cluster,
                std::map<std::int32_t, Bytes>& out) {
  const Mesh& mesh = layout.mesh();
  for (std::int64_t p = 0; p < mesh.size(); ++p) {
    const std::int32_t node = cluster.cluster().gpu(cluster.gpu_of(mesh.rank_at(p))).node;
    out[node] += Bytes{layout.box_at_position(p).volume() * element};
  }
}

std::string megabytes(Bytes b) { return fmt::format("{:.1f} MB", static_cast<double>(b.value) / 1e6); }

}  // namespace

std::map<std::int32_t, Bytes> shard_bytes_by_node(const ReshardProblem& problem,
                                                  const PlacedCluster& cluster) {
  std::map<std::int32_t, Bytes> out;
  for (const auto& t : problem.tensors()) {
    if (held_at_source(t.tensor)) add_shards(t.source, dtype_size(held_dtype(t.tensor, true)), cluster, out);
    add_shards(t.destination, dtype_size(held_dtype(t.tensor, false)), cluster, out);
  }
  return out;
}

ClusterSpec in_cache_regime(ClusterSpec spec, const std::map<std::int32_t, Bytes>& held_by_node) {
  // One pass over the NICs and GPUs, whatever the number of caches.
  std::map<std::int32_t, const CacheSpec*> fitting;
  for (const CacheSpec& cache : spec.caches) {
    const auto held = held_by_node.find(cache.node);
    if (held == held_by_node.end() || held->second <= cache.capacity) fitting.emplace(cache.node, &cache);
  }
  if (fitting.empty()) return spec;
  for (auto& nic : spec.nics)
    if (const auto it = fitting.find(nic.node); it != fitting.end()) {
      nic.bandwidth = it->second->nic_bandwidth;
      nic.latency = it->second->nic_latency;
      nic.chunk_overhead = it->second->chunk_overhead;
      nic.transfer_overhead = it->second->transfer_overhead;
    }
  for (auto& gpu : spec.gpus)
    if (const auto it = fitting.find(gpu.node); it != fitting.end())
      gpu.copy_bandwidth = it->second->copy_bandwidth;
  return spec;
}

Result<std::optional<CacheRegime>> cache_regime(const ReshardProblem& problem, const PlacedCluster& cluster) {
  const auto& caches = cluster.cluster().spec().caches;
  if (caches.empty()) return std::nullopt;
  const auto held = shard_bytes_by_node(problem, cluster);
  CacheRegime out{
      .cluster = REFIT_TRY(PlacedCluster::make(
          REFIT_TRY(Cluster::make(in_cache_regime(cluster.cluster().spec(), held))), cluster.ranks())),
      .notes = {}};
  // A line per cached node the refit holds shards on, not per cache of the file.
  std::map<std::int32_t, const CacheSpec*> by_node;
  for (const CacheSpec& cache : caches) by_node.emplace(cache.node, &cache);
  for (const auto& [node, bytes] : held) {
    const auto it = by_node.find(node);
    if (it == by_node.end()) continue;
    const Bytes capacity = it->second->capacity;
    out.notes.push_back(
        bytes > capacity
            ? fmt::format(
                  "node {}: its ranks hold {} of shards, more than its cache was calibrated with ({}): "
                  "its links at the streaming figures",
                  node, megabytes(bytes), megabytes(capacity))
            : fmt::format("node {}: its ranks hold {} of shards, within its cache ({}): its links at the "
                          "in-cache figures",
                          node, megabytes(bytes), megabytes(capacity)));
  }
  return out;
}

}  // namespace refit
