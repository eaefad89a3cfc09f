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
    : segments_(t.segments.size()), limit_(limit) {
  segment_offsets(plan, t, data_);
  bool full = true;  // every chunk but the last `limit` bytes
  cut(data_, segments_, limit, [&](std::int64_t end) {
    ++chunks_;
    full = full && (end == chunks_ * limit || end == bytes());
  });
  if (full) return;
  data_.reserve(data_.size() + static_cast<std::size_t>(chunks_));
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
  if (!stored_ends()) {
    if (byte < 0) return 0;
    return byte < bytes() ? byte / limit_ : chunks_;
  }
  const auto ends = std::span<const std::int64_t>(data_).subspan(2 * segments_ + 1);
  return std::ranges::upper_bound(ends, byte) - ends.begin();
}

std::vector<Piece> MessageLayout::pieces(std::int64_t k) const {
  std::vector<Piece> out;
  for_each_piece(k, [&](const Piece& p) { out.push_back(p); });
  return out;
}

}  // namespace refit::lowering
