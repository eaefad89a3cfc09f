// NeMo RL's default non-colocated refit (docs/frameworks.md):
//  1. every training rank materialises every full tensor (pipeline broadcasts, TP/EP all-gathers):
//     each missing source shard comes from a holder in the rank's own NVLink domain when there is
//     one, otherwise from holder (rank mod replicas), which spreads replicated shards;
//  2. training rank 0 broadcasts every full tensor over one communicator holding all ranks, as
//     NCCL does: one ring per channel, a channel per NIC of rank 0's node, each ring leaving every
//     node through another GPU so that the channels use different NICs; tensors are dealt to the
//     channels by size; the ring pipelines in NCCL's 512 KiB chunks;
//  3. every inference rank keeps the slice it needs.
// Simplification: the broadcast starts once rank 0 holds everything. NeMo's double buffering
// overlaps the two, so this model can overstate the baseline by at most its broadcast time.
#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "plan_builder.h"
#include "strategies.h"

namespace refit::planner_detail {
namespace {

constexpr Bytes kNcclChunk{512 << 10};
constexpr Rank kRoot{0};

Rank gather_sender(const std::vector<Rank>& holders, Rank receiver, const PlacedCluster& c) {
  std::vector<Rank> near;
  for (Rank h : holders)
    if (c.domain_of(h) == c.domain_of(receiver)) near.push_back(h);
  const auto& pool = near.empty() ? holders : near;
  return pool[static_cast<std::size_t>(receiver.value) % pool.size()];
}

// Handles of the messages that brought each (tensor, source shard) to the root.
using RootArrivals = std::map<std::pair<std::uint32_t, std::uint32_t>, Handle>;

RootArrivals gather(PlanBuilder& b, const PlanContext& c) {
  RootArrivals at_root;
  for (std::uint32_t t = 0; t < c.overlaps.size(); ++t) {
    const auto& sources = c.overlaps[t].sources;
    for (std::int32_t r = 0; r < c.problem.source_ranks(); ++r)
      for (std::uint32_t s = 0; s < sources.size(); ++s) {
        const auto& holders = sources[s].holders;
        if (std::ranges::find(holders, Rank{r}) != holders.end()) continue;
        const Handle h = b.add(0, 0, gather_sender(holders, Rank{r}, c.cluster), Rank{r}, t, sources[s].box);
        if (Rank{r} == kRoot) at_root[{t, s}] = h;
      }
  }
  return at_root;
}

// A ring per NIC of the root's node (NCCL's channels), at most one per tensor: a channel dealt no
// tensor carries nothing. Each ring visits nodes in order and, inside one, starts at the GPU the
// channel's slot names.
std::vector<std::vector<Rank>> rings(const PlacedCluster& c, std::int32_t world, std::size_t tensors) {
  std::map<std::int32_t, std::vector<GpuId>> node_gpus;
  std::vector<std::size_t> slot(c.cluster().gpus().size());  // a GPU's index among its node's
  for (const auto& g : c.cluster().gpus()) {
    auto& local = node_gpus[g.node];
    slot[static_cast<std::size_t>(g.id.value)] = local.size();
    local.push_back(g.id);
  }
  std::set<std::int32_t> root_nics;
  for (GpuId g : node_gpus[c.cluster().gpu(c.gpu_of(kRoot)).node])
    if (auto n = c.cluster().nic_of(g)) root_nics.insert(*n);
  const auto channels = std::clamp<std::size_t>(root_nics.size(), 1, std::max<std::size_t>(1, tensors));
  std::vector<std::vector<Rank>> out;
  for (std::size_t ch = 0; ch < channels; ++ch) {
    std::vector<std::tuple<std::int32_t, std::size_t, std::int32_t>> keyed;  // (node, slot, rank)
    for (std::int32_t r = 1; r < world; ++r) {
      const auto& gpu = c.cluster().gpu(c.gpu_of(Rank{r}));
      const auto size = node_gpus[gpu.node].size();
      const auto idx = slot[static_cast<std::size_t>(gpu.id.value)];
      keyed.emplace_back(gpu.node, (idx + size - ch % size) % size, r);
    }
    std::ranges::sort(keyed);
    std::vector<Rank> ring{kRoot};
    for (const auto& k : keyed) ring.emplace_back(std::get<2>(k));
    out.push_back(std::move(ring));
  }
  return out;
}

// Deals tensors to channels, largest load first, so channels carry similar bytes.
std::vector<std::vector<std::uint32_t>> deal(const ReshardProblem& p, std::size_t channels) {
  std::vector<std::vector<std::uint32_t>> out(channels);
  std::vector<std::int64_t> load(channels, 0);
  for (std::uint32_t t = 0; t < p.tensors().size(); ++t) {
    const auto ch = static_cast<std::size_t>(std::ranges::min_element(load) - load.begin());
    out[ch].push_back(t);
    load[ch] += p.tensors()[t].tensor.bytes().value;
  }
  return out;
}

void broadcast(PlanBuilder& b, const PlanContext& c, const RootArrivals& at_root) {
  const auto all_rings = rings(c.cluster, c.problem.world_size(), c.problem.tensors().size());
  const auto dealt = deal(c.problem, all_rings.size());
  for (std::size_t ch = 0; ch < all_rings.size(); ++ch) {
    const auto& ring = all_rings[ch];
    if (ring.size() < 2 || dealt[ch].empty()) continue;
    Handle prev = kFromSourceShard;
    for (const std::uint32_t t : dealt[ch]) {
      const auto& sources = c.overlaps[t].sources;
      for (std::uint32_t s = 0; s < sources.size(); ++s) {
        const auto it = at_root.find({t, s});
        prev = b.add(1, ch, kRoot, ring[1], t, sources[s].box,
                     it == at_root.end() ? kFromSourceShard : it->second);
      }
    }
    for (std::size_t hop = 2; hop < ring.size(); ++hop) {
      const Handle arrived = prev;
      for (const std::uint32_t t : dealt[ch])
        if (!c.overlaps[t].sources.empty())
          prev = b.add(static_cast<std::uint32_t>(hop), ch, ring[hop - 1], ring[hop], t,
                       Box::whole(c.problem.tensors()[t].tensor.shape), arrived);
    }
  }
}

}  // namespace

Result<Plan> plan_gather_broadcast(const PlanContext& c) {
  PlanBuilder b(c.problem, c.cluster, c.strategy, kNcclChunk);
  const auto at_root = gather(b, c);
  broadcast(b, c, at_root);
  return std::move(b).finish();
}

}  // namespace refit::planner_detail
