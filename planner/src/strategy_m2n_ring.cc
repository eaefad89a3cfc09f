// NCCL M2N RING (hierarchical) with UNIFORM balancing, as docs/frameworks.md describes it:
// each selected source sends its piece to a leader replica in the first NVLink domain of its
// destination-replica range; the leader forwards, chunk by chunk, over the network to the
// same-index replica in the next domain of the chain and over NVLink to the other replicas of
// the shard in its own domain. Messages stay per tensor (one M2N call per tensor).
#include <map>

#include "plan_builder.h"
#include "strategies.h"

namespace refit::planner_detail {
namespace {

// The destination replicas one source serves, grouped by NVLink domain in chain order.
std::vector<std::vector<Rank>> domain_chain(const std::vector<Rank>& replicas, const PlacedCluster& c) {
  std::vector<std::vector<Rank>> chain;
  std::map<std::int32_t, std::size_t> group_of_domain;
  for (Rank r : replicas) {
    auto [it, inserted] = group_of_domain.try_emplace(c.domain_of(r), chain.size());
    if (inserted) chain.emplace_back();
    chain[it->second].push_back(r);
  }
  return chain;
}

std::uint64_t relay_key(std::uint32_t tensor, Handle via) {
  return (static_cast<std::uint64_t>(tensor) << 32) | static_cast<std::uint32_t>(via);
}

void add_ring(PlanBuilder& b, std::uint32_t t, const Box& box, Rank source,
              const std::vector<std::vector<Rank>>& chain, std::size_t piece_index) {
  std::size_t index = piece_index % chain[0].size();
  Handle arrived = b.add(0, t, source, chain[0][index], t, box);
  for (std::uint32_t hop = 0; hop < chain.size(); ++hop) {
    const auto& group = chain[hop];
    const Rank leader = group[index % group.size()];
    const std::uint32_t phase = hop + 1;
    for (Rank r : group)
      if (r != leader) b.add(phase, relay_key(t, arrived), leader, r, t, box, arrived);
    if (hop + 1 == chain.size()) break;
    index = index % chain[hop + 1].size();
    arrived = b.add(phase, relay_key(t, arrived), leader, chain[hop + 1][index], t, box, arrived);
  }
}

}  // namespace

Result<Plan> plan_m2n_ring(const PlanContext& c) {
  PlanBuilder b(c.problem, c.cluster, c.strategy, kM2nRingChunk);
  for (std::uint32_t t = 0; t < c.overlaps.size(); ++t) {
    const auto& o = c.overlaps[t];
    for (const auto& d : o.destinations) {
      const auto& replicas = d.shard.holders;
      const auto n_d = static_cast<std::int64_t>(replicas.size());
      for (std::size_t k = 0; k < d.pieces.size(); ++k) {
        const auto& holders = o.holders(d.pieces[k]);
        const auto n_s = static_cast<std::int64_t>(holders.size());
        std::map<std::int64_t, std::vector<Rank>> served;  // source replica -> its range
        for (std::int64_t i = 0; i < n_d; ++i)
          served[uniform_source(n_s, n_d, i)].push_back(replicas[static_cast<std::size_t>(i)]);
        for (const auto& [j, range] : served)
          add_ring(b, t, d.pieces[k].box, holders[static_cast<std::size_t>(j)],
                   domain_chain(range, c.cluster), k);
      }
    }
  }
  return std::move(b).finish();
}

}  // namespace refit::planner_detail
