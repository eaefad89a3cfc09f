#include "refit/lowering/relays.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/lowering/arrays.h"

namespace refit::lowering {

RelayIndex::RelayIndex(const Plan& plan)
    : plan_(plan), forwarded_(plan.transfers.size(), false), by_tensor_(plan.transfers.size()) {
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments)
      if (s.via != kFromSourceShard) forwarded_[static_cast<std::size_t>(s.via)] = true;
  for (const auto& t : plan.transfers) {
    if (!forwarded_[static_cast<std::size_t>(t.id)]) continue;
    auto& index = by_tensor_[static_cast<std::size_t>(t.id)];
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      const auto& s = t.segments[i];
      index.push_back(Entry{.tensor = s.tensor, .segment = static_cast<std::int32_t>(i)});
      same_box_.emplace(digest(t.id, s.tensor, s.box), static_cast<std::int32_t>(i));
    }
    std::ranges::sort(index);
  }
}

std::span<const RelayIndex::Entry> RelayIndex::candidates(const Segment& s) const {
  const auto& index = by_tensor_[static_cast<std::size_t>(s.via)];
  const auto [first, last] = std::ranges::equal_range(index, s.tensor, {}, &Entry::tensor);
  return {first, last};
}

std::uint64_t RelayIndex::digest(std::int32_t transfer, std::uint32_t tensor, const Box& box) {
  // FNV-1a over the fields.
  std::uint64_t h = 1469598103934665603ull;
  const auto mix = [&](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
  mix(static_cast<std::uint64_t>(transfer));
  mix(tensor);
  for (std::size_t d = 0; d < box.rank(); ++d) {
    mix(static_cast<std::uint64_t>(box.offset[d]));
    mix(static_cast<std::uint64_t>(box.extent[d]));
  }
  return h;
}

std::optional<std::int32_t> RelayIndex::containing(const Segment& s) const {
  const auto& upstream = plan_.transfers[static_cast<std::size_t>(s.via)];
  const auto [first, last] = same_box_.equal_range(digest(s.via, s.tensor, s.box));
  for (auto it = first; it != last; ++it) {
    const auto& u = upstream.segments[static_cast<std::size_t>(it->second)];
    if (u.tensor == s.tensor && u.box == s.box) return it->second;
  }
  for (const auto& u : candidates(s))
    if (upstream.segments[static_cast<std::size_t>(u.segment)].box.contains(s.box)) return u.segment;
  return std::nullopt;
}

Result<std::vector<RelayPart>> RelayIndex::parts(const Segment& s, std::int64_t first,
                                                 std::int64_t count) const {
  const auto& upstream = plan_.transfers[static_cast<std::size_t>(s.via)];
  std::vector<Box> ranges;
  range_boxes(s.box, first, first + count, ranges);
  std::vector<RelayPart> out;
  std::int64_t covered = 0;
  for (const auto& u : candidates(s))
    for (const auto& r : ranges)
      if (auto part = intersect(upstream.segments[static_cast<std::size_t>(u.segment)].box, r)) {
        covered += part->volume();
        out.push_back(RelayPart{.segment = u.segment, .box = std::move(*part)});
      }
  if (covered != count)
    return mismatch(
        fmt::format("forwards {} elements of {} of tensor '{}' but transfer {} delivered {} of them", count,
                    s.box.to_string(), plan_.tensors[s.tensor].name, s.via, covered));
  return out;
}

}  // namespace refit::lowering
