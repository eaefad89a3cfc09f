#include "refit/lowering/relays.h"

#include <algorithm>
#include <tuple>

#include <fmt/format.h>

#include "refit/lowering/arrays.h"

namespace refit::lowering {

RelayIndex::RelayIndex(const Plan& plan)
    : plan_(plan),
      forwarded_(plan.transfers.size(), false),
      by_tensor_(plan.transfers.size()),
      by_box_(plan.transfers.size()) {
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments)
      if (s.via != kFromSourceShard) forwarded_[static_cast<std::size_t>(s.via)] = true;
  for (const auto& t : plan.transfers) {
    if (!forwarded_[static_cast<std::size_t>(t.id)]) continue;
    auto& index = by_tensor_[static_cast<std::size_t>(t.id)];
    auto& by_box = by_box_[static_cast<std::size_t>(t.id)];
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      index.push_back(Entry{.tensor = t.segments[i].tensor, .segment = static_cast<std::int32_t>(i)});
      by_box.push_back(static_cast<std::int32_t>(i));
    }
    std::ranges::sort(index);
    std::ranges::sort(by_box, [&](std::int32_t a, std::int32_t b) {
      const auto& x = t.segments[static_cast<std::size_t>(a)];
      const auto& y = t.segments[static_cast<std::size_t>(b)];
      return std::tie(x.tensor, x.box, a) < std::tie(y.tensor, y.box, b);
    });
  }
}

std::span<const RelayIndex::Entry> RelayIndex::candidates(const Segment& s) const {
  const auto& index = by_tensor_[static_cast<std::size_t>(s.via)];
  const auto [first, last] = std::ranges::equal_range(index, s.tensor, {}, &Entry::tensor);
  return {first, last};
}

std::optional<std::int32_t> RelayIndex::containing(const Segment& s) const {
  const auto& upstream = plan_.transfers[static_cast<std::size_t>(s.via)];
  const auto& by_box = by_box_[static_cast<std::size_t>(s.via)];
  const auto segment_of = [&](std::int32_t i) -> const Segment& {
    return upstream.segments[static_cast<std::size_t>(i)];
  };
  const auto same = std::ranges::partition_point(by_box, [&](std::int32_t i) {
    const auto& u = segment_of(i);
    return std::tie(u.tensor, u.box) < std::tie(s.tensor, s.box);
  });
  if (same != by_box.end() && segment_of(*same).tensor == s.tensor && segment_of(*same).box == s.box)
    return *same;
  for (const auto& u : candidates(s))
    if (segment_of(u.segment).box.contains(s.box)) return u.segment;
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
