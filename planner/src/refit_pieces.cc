#include "refit_pieces.h"

#include <algorithm>
#include <cmath>

namespace refit::planner_detail {

std::vector<std::vector<std::vector<DomainGroup>>> group_by_domain(const PlanContext& c) {
  std::vector<std::vector<std::vector<DomainGroup>>> out(c.overlaps.size());
  for (std::size_t t = 0; t < c.overlaps.size(); ++t) {
    for (const auto& d : c.overlaps[t].destinations) {
      auto& groups = out[t].emplace_back();
      for (Rank r : d.shard.holders) {
        const auto domain = c.cluster.domain_of(r);
        auto it = std::ranges::find(groups, domain, &DomainGroup::domain);
        if (it == groups.end())
          it = groups.insert(groups.end(), DomainGroup{.domain = domain, .replicas = {}});
        it->replicas.push_back(r);
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

}  // namespace refit::planner_detail
