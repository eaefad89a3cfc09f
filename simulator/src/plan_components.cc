#include "plan_components.h"

#include "refit/core/disjoint_sets.h"
#include "refit/core/index.h"

namespace refit::sim {
std::vector<std::vector<std::int32_t>> plan_components(const Plan& plan, const PlacedCluster& cluster) {
  // Nodes: ranks, then GPUs, NICs and domains, so that a rank joins everything it can load.
  const auto ranks = at(plan.world_size());
  const auto gpus = cluster.cluster().gpus().size();
  const auto nics = cluster.cluster().nics().size();
  const bool uplinks = cluster.cluster().fabric().oversubscription > 1.0;
  const auto nodes = ranks + gpus + nics + cluster.cluster().domains().size();
  DisjointSets sets(nodes);
  std::vector<char> joined(ranks, 0);
  const auto join_rank = [&](Rank r) {
    if (joined[at(r.value)]) return;
    joined[at(r.value)] = 1;
    sets.join(at(r.value), ranks + at(cluster.gpu_of(r).value));
    if (auto n = cluster.nic_of(r)) sets.join(at(r.value), ranks + gpus + at(*n));
    if (uplinks) sets.join(at(r.value), ranks + gpus + nics + at(cluster.domain_of(r)));
  };
  for (const auto& t : plan.transfers) {
    join_rank(t.sender);
    join_rank(t.receiver);
    sets.join(at(t.sender.value), at(t.receiver.value));
  }
  std::vector<std::int32_t> component_of_root(nodes, -1);
  std::vector<std::vector<std::int32_t>> out;
  for (const auto& t : plan.transfers) {
    auto& c = component_of_root[sets.find(at(t.sender.value))];
    if (c < 0) {
      c = static_cast<std::int32_t>(out.size());
      out.emplace_back();
    }
    out[at(c)].push_back(t.id);
  }
  return out;
}

Plan component_plan(const Plan& plan, std::span<const std::int32_t> ids) {
  Plan out = plan.without_transfers();
  out.transfers.reserve(ids.size());
  std::vector<std::int32_t> renumbered(plan.transfers.size(), kFromSourceShard);
  for (const auto id : ids) {
    auto& t = out.transfers.emplace_back(plan.transfers[at(id)]);
    t.id = static_cast<std::int32_t>(out.transfers.size() - 1);
    renumbered[at(id)] = t.id;
    for (auto& s : t.segments)
      if (s.via != kFromSourceShard) s.via = renumbered[at(s.via)];
  }
  return out;
}

}  // namespace refit::sim
