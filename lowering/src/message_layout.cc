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
// past its start; `on_end` gets each end in order. Elements are at most 8 bytes and chunks at
// least 16, so every chunk is non-empty.
template <class OnEnd>
void cut(const std::vector<std::int64_t>& begin, const std::vector<std::int64_t>& element, std::int64_t limit,
         OnEnd on_end) {
  const std::int64_t total = begin.back();
  std::size_t seg = 0;
  for (std::int64_t pos = 0; pos < total;) {
    const std::int64_t target = pos + limit;
    if (target >= total) {
      on_end(total);
      return;
    }
    while (begin[seg + 1] <= target) ++seg;
    const std::int64_t es = element[seg];
    pos = begin[seg] + (target - begin[seg]) / es * es;
    on_end(pos);
  }
}

// Each segment's first byte in the message (and the total last), and its element size.
void segment_offsets(const Plan& plan, const Transfer& t, std::vector<std::int64_t>& begin,
                     std::vector<std::int64_t>& element) {
  begin.reserve(t.segments.size() + 1);
  element.reserve(t.segments.size());
  begin.push_back(0);
  for (const auto& s : t.segments) {
    element.push_back(dtype_size(plan.tensors[s.tensor].dtype));
    begin.push_back(begin.back() + plan.segment_bytes(s).value);
  }
}

}  // namespace

MessageLayout::MessageLayout(const Plan& plan, const Transfer& t, std::int64_t limit) {
  segment_offsets(plan, t, begin_, element_);
  cut(begin_, element_, limit, [&](std::int64_t end) { ends_.push_back(end); });
}

std::int64_t MessageLayout::count_chunks(const Plan& plan, const Transfer& t, std::int64_t limit) {
  std::vector<std::int64_t> begin, element;
  segment_offsets(plan, t, begin, element);
  std::int64_t chunks = 0;
  cut(begin, element, limit, [&](std::int64_t) { ++chunks; });
  return chunks;
}

std::int64_t MessageLayout::chunk_of(std::int64_t byte) const {
  return std::ranges::upper_bound(ends_, byte) - ends_.begin();
}

std::vector<Piece> MessageLayout::pieces(std::int64_t k) const {
  std::vector<Piece> out;
  for_each_piece(k, [&](const Piece& p) { out.push_back(p); });
  return out;
}

}  // namespace refit::lowering
