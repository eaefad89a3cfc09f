#include "upstream_segments.h"

#include <algorithm>

namespace refit::planner_detail {

std::uint64_t UpstreamSegments::digest(const Segment& s) {
  std::uint64_t h = s.tensor * 0x9e3779b97f4a7c15ull;
  for (std::size_t d = 0; d < s.box.rank(); ++d)
    h = (h ^ static_cast<std::uint64_t>(s.box.offset[d]) ^
         (static_cast<std::uint64_t>(s.box.extent[d]) << 32)) *
        0xbf58476d1ce4e5b9ull;
  return h;
}

void UpstreamSegments::add(std::int32_t message, std::span<const Segment> segments) {
  first_.resize(static_cast<std::size_t>(message) + 1, entries_.size());  // skipped ones: empty
  for (std::size_t k = 0; k < segments.size(); ++k)
    entries_.push_back({.digest = digest(segments[k]), .segment = static_cast<std::uint32_t>(k)});
  std::sort(entries_.begin() + static_cast<std::ptrdiff_t>(first_.back()), entries_.end());
  first_.push_back(entries_.size());
}

std::optional<std::size_t> UpstreamSegments::holding(std::int32_t message, std::span<const Segment> segments,
                                                     const Segment& s) const {
  const auto m = static_cast<std::size_t>(message);
  if (m + 1 < first_.size()) {
    const auto mine = std::span(entries_).subspan(first_[m], first_[m + 1] - first_[m]);
    const auto d = digest(s);
    for (auto it = std::ranges::lower_bound(mine, d, {}, &Entry::digest); it != mine.end() && it->digest == d;
         ++it)
      if (segments[it->segment].tensor == s.tensor && segments[it->segment].box == s.box) return it->segment;
  }
  for (std::size_t k = 0; k < segments.size(); ++k)
    if (segments[k].tensor == s.tensor && segments[k].box.contains(s.box)) return k;
  return std::nullopt;
}

}  // namespace refit::planner_detail
