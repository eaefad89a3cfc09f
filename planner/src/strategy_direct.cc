// NCCL M2N DIRECT with UNIFORM balancing: each selected source replica sends its overlap straight
// to every destination replica in its range. M2N runs one call per tensor, so messages are per
// (tensor, sender, receiver): nothing is coalesced across tensors.
#include "plan_builder.h"
#include "strategies.h"

namespace refit::planner_detail {

Result<Plan> plan_direct(const PlanContext& c) {
  PlanBuilder b(c.problem, c.cluster, c.strategy, c.options.chunk);
  for (std::uint32_t t = 0; t < c.overlaps.size(); ++t) {
    const auto& o = c.overlaps[t];
    for (const auto& d : o.destinations) {
      const auto& replicas = d.shard.holders;
      const auto n_d = static_cast<std::int64_t>(replicas.size());
      for (const auto& p : d.pieces) {
        const auto& holders = o.holders(p);
        const auto n_s = static_cast<std::int64_t>(holders.size());
        for (std::int64_t i = 0; i < n_d; ++i) {
          const Rank from = holders[static_cast<std::size_t>(uniform_source(n_s, n_d, i))];
          b.add(0, t, from, replicas[static_cast<std::size_t>(i)], t, p.box);
        }
      }
    }
  }
  return std::move(b).finish();
}

}  // namespace refit::planner_detail
