#include "refit_pieces.h"

#include <algorithm>
#include <cmath>

namespace refit::planner_detail {

DomainGroups group_by_domain(const PlanContext& c) {
  DomainGroups out(c.overlaps.size());
  std::vector<std::int32_t> group_of(c.cluster.cluster().domains().size(), -1);  // of the shard's domains
  for (std::size_t t = 0; t < c.overlaps.size(); ++t) {
    for (const auto& d : c.overlaps[t].destinations) {
      auto& groups = out[t].emplace_back();
      for (Rank r : d.shard.holders) {
        auto& g = group_of[static_cast<std::size_t>(c.cluster.domain_of(r))];
        if (g < 0) {
          g = static_cast<std::int32_t>(groups.size());
          groups.push_back(DomainGroup{.domain = c.cluster.domain_of(r), .replicas = {}});
        }
        groups[static_cast<std::size_t>(g)].replicas.push_back(r);
      }
      for (auto& g : groups) {
        group_of[static_cast<std::size_t>(g.domain)] = -1;
        g.copy = static_cast<std::size_t>(&g - groups.data());
        g.copies = groups.size();
      }
    }
  }
  return out;
}

std::pair<std::size_t, std::size_t> holder_share(std::size_t holders, std::size_t copy, std::size_t copies) {
  return {copy * holders / copies, ((copy + 1) * holders + copies - 1) / copies};
}

std::int32_t NicSets::intern(std::vector<std::int32_t> nics) {
  std::ranges::sort(nics);
  nics.erase(std::unique(nics.begin(), nics.end()), nics.end());
  auto [it, inserted] = ids_.try_emplace(nics, static_cast<std::int32_t>(sets_.size()));
  if (inserted) sets_.push_back(std::move(nics));
  return it->second;
}

std::optional<std::pair<Box, Box>> split_rows(const Box& box, Bytes bytes, std::int64_t element_size) {
  for (std::size_t d = 0; d < box.rank(); ++d) {
    const auto rows = box.extent[d];
    if (rows <= 1) continue;
    const double row_bytes = static_cast<double>(box.volume() / rows * element_size);
    const auto head_rows =
        std::clamp<std::int64_t>(std::llround(static_cast<double>(bytes.value) / row_bytes), 1, rows - 1);
    Box head = box, tail = box;
    head.extent[d] = head_rows;
    tail.offset[d] += head_rows;
    tail.extent[d] -= head_rows;
    return std::pair(std::move(head), std::move(tail));
  }
  return std::nullopt;
}

NicLoads nic_loads(const std::vector<Assignment>& assignments, const std::vector<std::int64_t>& bytes,
                   const PlacedCluster& cluster) {
  const auto nics = cluster.cluster().nics().size();
  NicLoads out{.tx = std::vector<double>(nics), .rx = std::vector<double>(nics), .receiving_s = 0};
  for (std::size_t i = 0; i < assignments.size(); ++i) {
    const auto& a = assignments[i];
    const Rank sender =
        a.relay_from >= 0 ? assignments[static_cast<std::size_t>(a.relay_from)].landing : a.sender;
    if (const auto n = cluster.nic_of(sender))
      out.tx[static_cast<std::size_t>(*n)] += static_cast<double>(bytes[i]);
    if (const auto n = cluster.nic_of(a.landing))
      out.rx[static_cast<std::size_t>(*n)] += static_cast<double>(bytes[i]);
  }
  for (std::size_t n = 0; n < nics; ++n)
    out.receiving_s = std::max(out.receiving_s, out.rx[n] / cluster.cluster().nics()[n].bandwidth.value);
  return out;
}

}  // namespace refit::planner_detail
