#include "refit/lowering/message_layout.h"

#include <algorithm>

namespace refit::lowering {

std::int64_t chunk_limit(const Transfer& t, Bytes staging) {
  const std::int64_t half = staging.value / 2;
  const std::int64_t wanted = t.chunk.value > 0 ? std::min(t.chunk.value, half) : half;
  return std::max(kAlign, wanted / kAlign * kAlign);
}

namespace {

// The one chunk rule: each chunk ends at the last element boundary at or before `limit` bytes
// past its start; `on_end` gets each end in order. `v` holds segment_offsets() of `n` segments;
// on_end may append to it (it is read by index). Elements are at most 8 bytes and chunks at least
// 16, so every chunk is non-empty.
template <class OnEnd>
void cut(const std::vector<std::int64_t>& v, std::size_t n, std::int64_t limit, OnEnd on_end) {
  const std::int64_t total = v[n];
  std::size_t seg = 0;
  for (std::int64_t pos = 0; pos < total;) {
    const std::int64_t target = pos + limit;
    if (target >= total) {
      on_end(total);
      return;
    }
    while (v[seg + 1] <= target) ++seg;
    const std::int64_t es = v[n + 1 + seg];
    pos = v[seg] + (target - v[seg]) / es * es;
    on_end(pos);
  }
}

// Into `out` (empty): each segment's first byte in the message and the total after them, then
// each segment's element size.
void segment_offsets(const Plan& plan, const Transfer& t, std::vector<std::int64_t>& out) {
  const std::size_t n = t.segments.size();
  out.resize(2 * n + 1);
  out[0] = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const Segment& s = t.segments[i];
    out[n + 1 + i] = dtype_size(plan.tensors[s.tensor].dtype);
    out[i + 1] = out[i] + plan.segment_bytes(s).value;
  }
}

}  // namespace

MessageLayout::MessageLayout(const Plan& plan, const Transfer& t, std::int64_t limit)
    : segments_(t.segments.size()) {
  // Room for the chunks the message cuts into unless element ends shorten some of them.
  std::int64_t total = 0;
  for (const Segment& s : t.segments) total += plan.segment_bytes(s).value;
  data_.reserve(2 * segments_ + 2 + static_cast<std::size_t>(std::max<std::int64_t>(0, total) / limit));
  segment_offsets(plan, t, data_);
  cut(data_, segments_, limit, [&](std::int64_t end) { data_.push_back(end); });
}

std::int64_t MessageLayout::count_chunks(const Plan& plan, const Transfer& t, std::int64_t limit) {
  std::vector<std::int64_t> offsets;
  segment_offsets(plan, t, offsets);
  std::int64_t chunks = 0;
  cut(offsets, t.segments.size(), limit, [&](std::int64_t) { ++chunks; });
  return chunks;
}

std::int64_t MessageLayout::chunk_of(std::int64_t byte) const {
  const auto end = ends();
  return std::ranges::upper_bound(end, byte) - end.begin();
}

std::vector<Piece> MessageLayout::pieces(std::int64_t k) const {
  std::vector<Piece> out;
  for_each_piece(k, [&](const Piece& p) { out.push_back(p); });
  return out;
}

}  // namespace refit::lowering
