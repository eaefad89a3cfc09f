// PlanBuilder's relay slices (plan_builder.h, RelayOrder::kArrival): relays cut into slices of
// about kRelaySliceChunks chunks, each placed in its pair's stream by when its own data lands.
#include <algorithm>
#include <numeric>
#include <utility>

#include "plan_builder.h"
#include "refit_pieces.h"

namespace refit::planner_detail {

bool PlanBuilder::sliced(Handle h) const {
  const auto& p = pending_[static_cast<std::size_t>(h)];
  return p.bytes.value > kRelaySliceChunks * chunk_.value && p.relays == p.segments.size();
}

void PlanBuilder::cut_relay_segments() {
  const std::int64_t slice = kRelaySliceChunks * chunk_.value;
  std::vector<bool> cut(pending_.size(), false);
  for (std::size_t h = 0; h < pending_.size(); ++h) {
    if (!sliced(static_cast<Handle>(h))) continue;
    auto& segments = pending_[h].segments;
    if (std::ranges::none_of(segments, [&](const Segment& s) { return box_bytes(s) > slice; })) continue;
    std::vector<Segment> out;
    for (auto& s : segments) {
      const auto element = dtype_size(problem_.tensors()[s.tensor].tensor.dtype);
      while (box_bytes(s) > slice) {
        auto halves = split_rows(s.box, Bytes{slice}, element);
        if (!halves) break;
        out.push_back(Segment{.tensor = s.tensor, .box = std::move(halves->first), .via = s.via});
        s.box = std::move(halves->second);
      }
      out.push_back(std::move(s));
    }
    segments = std::move(out);
    pending_[h].relays = segments.size();
    cut[h] = true;
  }
  cut_along_upstreams(std::move(cut));
}

void PlanBuilder::cut_along_upstreams(std::vector<bool> cut) {
  // A pass cuts the relays of every message cut so far; a message cut in a pass has its relays
  // cut again in the next (those before it in the pass read its old segments, and a message may
  // forward from one made after it). Each cut only adds segments, so the passes end.
  for (bool again = true; again;) {
    again = false;
    UpstreamSegments index;
    for (std::size_t h = 0; h < pending_.size(); ++h)
      if (cut[h]) index.add(static_cast<Handle>(h), pending_[h].segments);
    for (std::size_t h = 0; h < pending_.size(); ++h) {
      auto& p = pending_[h];
      const auto reads_cut = [&](const Segment& s) {
        return s.via != kFromSourceShard && cut[static_cast<std::size_t>(s.via)];
      };
      if (p.relays == 0 || std::ranges::none_of(p.segments, reads_cut)) continue;
      std::vector<Segment> out;
      out.reserve(p.segments.size());
      for (auto& s : p.segments) {
        if (!reads_cut(s) || index.holding(s.via, pending_[static_cast<std::size_t>(s.via)].segments, s)) {
          out.push_back(std::move(s));
          continue;
        }
        for (const auto& u : pending_[static_cast<std::size_t>(s.via)].segments)
          if (u.tensor == s.tensor)
            if (auto part = intersect(u.box, s.box))
              out.push_back(Segment{s.tensor, std::move(*part), s.via});
      }
      const std::size_t added = out.size() - p.segments.size();  // a cut relay segment makes relay segments
      p.segments = std::move(out);
      if (added == 0) continue;
      p.relays += added;
      again = true;
      cut[h] = true;
    }
  }
}

std::vector<std::int64_t> PlanBuilder::latest(const PerSegment& arrival) const {
  std::vector<std::int64_t> out(pending_.size(), 0);
  for (std::size_t h = 0; h < pending_.size(); ++h)
    if (const auto at = arrival.of(static_cast<Handle>(h)); !at.empty()) out[h] = std::ranges::max(at);
  return out;
}

namespace {

// A message's segments by when their data reaches its sender, ties in their own order.
std::vector<std::size_t> arrival_order(std::span<const std::int64_t> at) {
  std::vector<std::size_t> order(at.size());
  std::iota(order.begin(), order.end(), 0);
  std::ranges::stable_sort(order, {}, [&](std::size_t k) { return at[k]; });
  return order;
}

}  // namespace

void PlanBuilder::order_relays_by_arrival(const PerSegment& arrival) {
  for (std::size_t h = 0; h < pending_.size(); ++h) {
    const auto at = arrival.of(static_cast<Handle>(h));
    if (at.empty() || sliced(static_cast<Handle>(h)) || std::ranges::is_sorted(at)) continue;
    const auto by_arrival = arrival_order(at);
    std::vector<Segment> sorted;
    sorted.reserve(by_arrival.size());
    for (const std::size_t k : by_arrival) sorted.push_back(std::move(pending_[h].segments[k]));
    pending_[h].segments = std::move(sorted);
  }
}

std::vector<std::size_t> PlanBuilder::forwarding_depths() const {
  std::vector<std::size_t> depth(pending_.size(), 0);
  for (bool again = true; again;) {  // a message may forward from one made after it
    again = false;
    for (std::size_t h = 0; h < pending_.size(); ++h) {
      if (pending_[h].relays == 0) continue;
      std::size_t d = 0;
      for (const auto& s : pending_[h].segments)
        if (s.via != kFromSourceShard) d = std::max(d, depth[static_cast<std::size_t>(s.via)] + 1);
      again = again || d != depth[h];
      depth[h] = d;
    }
  }
  return depth;
}

bool PlanBuilder::sliced_at(std::span<const std::size_t> depth, std::size_t level) const {
  for (std::size_t h = 0; h < pending_.size(); ++h)
    if (depth[h] == level && sliced(static_cast<Handle>(h))) return true;
  return false;
}

std::vector<std::vector<PlanBuilder::RelayRef>> PlanBuilder::relays_of_sliced(
    std::span<const std::size_t> depth, std::size_t level) const {
  std::vector<std::vector<RelayRef>> out(pending_.size());
  const auto cut = [&](Handle h) { return depth[static_cast<std::size_t>(h)] == level && sliced(h); };
  for (std::size_t h = 0; h < pending_.size(); ++h) {
    if (pending_[h].relays == 0) continue;
    const auto& segments = pending_[h].segments;
    for (std::size_t k = 0; k < segments.size(); ++k)
      if (segments[k].via != kFromSourceShard && cut(segments[k].via))
        out[static_cast<std::size_t>(segments[k].via)].push_back({static_cast<Handle>(h), k});
  }
  return out;
}

std::vector<std::int64_t> PlanBuilder::slice_relays(const PerSegment& arrival,
                                                    const UpstreamSegments& upstream_segments,
                                                    std::vector<std::size_t>& depth, std::size_t level) {
  const std::size_t made = pending_.size();
  const auto relays_of = relays_of_sliced(depth, level);
  auto when = latest(arrival);
  for (std::size_t i = 0; i < made; ++i) {
    const auto h = static_cast<Handle>(i);
    if (depth[i] != level || !sliced(h)) continue;
    // Which of h's segments each relay of it reads: that segment's slice is the relay's new `via`.
    // A relay read from several (none after cut_along_upstreams) keeps h whole.
    std::vector<std::size_t> read;
    for (const auto& r : relays_of[i])
      if (const auto k = upstream_segments.holding(h, pending_[i].segments, relay_segment(r)))
        read.push_back(*k);
    if (read.size() != relays_of[i].size()) continue;
    const auto slice_of = slice_message(h, arrival.of(h), when);
    depth.resize(pending_.size(), level);
    for (std::size_t r = 0; r < read.size(); ++r) relay_segment(relays_of[i][r]).via = slice_of[read[r]];
  }
  return when;
}

std::vector<Handle> PlanBuilder::slice_message(Handle h, std::span<const std::int64_t> at,
                                               std::vector<std::int64_t>& latest) {
  const std::int64_t slice = kRelaySliceChunks * chunk_.value;
  Pending whole = std::exchange(pending_[static_cast<std::size_t>(h)], {});
  const auto empty = [&] {
    return Pending{.phase = whole.phase,
                   .from = whole.from,
                   .to = whole.to,
                   .key = whole.key,
                   .bytes = Bytes{0},
                   .segments = {}};
  };
  pending_[static_cast<std::size_t>(h)] = empty();
  latest[static_cast<std::size_t>(h)] = 0;
  // A relay's last bytes to land go one chunk a slice: a pair that relays the data of many
  // messages landing together at the end then waits for no more than a chunk of each. A slice
  // also ends where its data starts coming from another message (a slice of the message it
  // relays), so that it follows a single upstream chunk by chunk.
  std::int64_t left = whole.bytes.value;  // not yet in a slice
  const auto next_slice = [&] { return left > 2 * slice ? slice : std::max(chunk_.value, left - slice); };
  std::int64_t target = next_slice();
  Handle into = h;  // the original message takes the first slice, new ones the others
  auto& segments = whole.segments;
  std::vector<Handle> slice_of(segments.size());
  for (const std::size_t k : arrival_order(at)) {
    const auto& current = pending_[static_cast<std::size_t>(into)];
    const bool other_upstream = !current.segments.empty() &&
                                current.segments.front().via != segments[k].via &&
                                current.bytes.value >= chunk_.value;
    if (current.bytes.value >= target || other_upstream) {
      target = next_slice();
      into = static_cast<Handle>(pending_.size());
      pending_.push_back(empty());
      latest.push_back(0);
    }
    auto& p = pending_[static_cast<std::size_t>(into)];
    p.bytes += Bytes{box_bytes(segments[k])};
    left -= box_bytes(segments[k]);
    p.segments.push_back(std::move(segments[k]));
    ++p.relays;
    latest[static_cast<std::size_t>(into)] = std::max(latest[static_cast<std::size_t>(into)], at[k]);
    slice_of[k] = into;
  }
  return slice_of;
}

}  // namespace refit::planner_detail
