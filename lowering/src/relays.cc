#include "refit/lowering/relays.h"

#include <fmt/format.h>

#include "refit/lowering/arrays.h"

namespace refit::lowering {

RelayIndex::RelayIndex(const Plan& plan)
    : plan_(plan), by_tensor_(plan.transfers.size()), forwarded_(plan.transfers.size(), false) {
  for (const auto& t : plan.transfers) {
    auto& index = by_tensor_[static_cast<std::size_t>(t.id)];
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      const auto& s = t.segments[i];
      index[s.tensor].push_back(static_cast<std::int32_t>(i));
      if (s.via != kFromSourceShard) forwarded_[static_cast<std::size_t>(s.via)] = true;
    }
  }
}

std::span<const std::int32_t> RelayIndex::candidates(const Segment& s) const {
  const auto& index = by_tensor_[static_cast<std::size_t>(s.via)];
  const auto it = index.find(s.tensor);
  if (it == index.end()) return {};
  return it->second;
}

std::optional<std::int32_t> RelayIndex::containing(const Segment& s) const {
  const auto& upstream = plan_.transfers[static_cast<std::size_t>(s.via)];
  for (const auto u : candidates(s))
    if (upstream.segments[static_cast<std::size_t>(u)].box.contains(s.box)) return u;
  return std::nullopt;
}

Result<std::vector<RelayPart>> RelayIndex::parts(const Segment& s, std::int64_t first,
                                                 std::int64_t count) const {
  const auto& upstream = plan_.transfers[static_cast<std::size_t>(s.via)];
  std::vector<Box> ranges;
  range_boxes(s.box, first, first + count, ranges);
  std::vector<RelayPart> out;
  std::int64_t covered = 0;
  for (const auto u : candidates(s))
    for (const auto& r : ranges)
      if (auto part = intersect(upstream.segments[static_cast<std::size_t>(u)].box, r)) {
        covered += part->volume();
        out.push_back(RelayPart{.segment = u, .box = std::move(*part)});
      }
  if (covered != count)
    return mismatch(
        fmt::format("forwards {} elements of {} of tensor '{}' but transfer {} delivered {} of them", count,
                    s.box.to_string(), plan_.tensors[s.tensor].name, s.via, covered));
  return out;
}

}  // namespace refit::lowering
