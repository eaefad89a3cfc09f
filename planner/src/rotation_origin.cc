#include "rotation_origin.h"

#include <algorithm>
#include <limits>

#include "refit/core/disjoint_sets.h"

namespace refit::planner_detail {

std::vector<std::int32_t> rotation_origins(std::span<const std::pair<std::int32_t, std::int32_t>> pairs,
                                           std::int32_t source_ranks, std::int32_t world) {
  const auto n = static_cast<std::size_t>(world);
  DisjointSets sets(n);
  for (const auto& [from, to] : pairs)
    sets.join(static_cast<std::size_t>(from), static_cast<std::size_t>(to));
  // The first rank of each side per part, found at the part's root.
  constexpr auto kNone = std::numeric_limits<std::int32_t>::max();
  std::vector<std::int32_t> first_source(n, kNone), first_destination(n, kNone);
  for (std::int32_t r = 0; r < world; ++r) {
    auto& first = r < source_ranks ? first_source[sets.find(static_cast<std::size_t>(r))]
                                   : first_destination[sets.find(static_cast<std::size_t>(r))];
    first = std::min(first, r);
  }
  std::vector<std::int32_t> out(n);
  for (std::int32_t r = 0; r < world; ++r) {
    const auto root = sets.find(static_cast<std::size_t>(r));
    out[static_cast<std::size_t>(r)] =
        r < source_ranks ? first_source[root] : first_destination[root] - source_ranks;
  }
  return out;
}

}  // namespace refit::planner_detail
