#include "refit/lowering/message_layout.h"

#include <algorithm>

namespace refit::lowering {

std::int64_t chunk_limit(const Transfer& t, Bytes staging) {
  const std::int64_t half = staging.value / 2;
  const std::int64_t wanted = t.chunk.value > 0 ? std::min(t.chunk.value, half) : half;
  return std::max(kAlign, wanted / kAlign * kAlign);
}

MessageLayout::MessageLayout(const Plan& plan, const Transfer& t, std::int64_t limit) {
  begin_.reserve(t.segments.size() + 1);
  element_.reserve(t.segments.size());
  begin_.push_back(0);
  for (const auto& s : t.segments) {
    element_.push_back(dtype_size(plan.tensors[s.tensor].dtype));
    begin_.push_back(begin_.back() + plan.segment_bytes(s).value);
  }
  const std::int64_t total = begin_.back();
  std::size_t seg = 0;
  for (std::int64_t pos = 0; pos < total;) {
    const std::int64_t target = pos + limit;
    if (target >= total) {
      ends_.push_back(total);
      break;
    }
    while (begin_[seg + 1] <= target) ++seg;
    // The last element boundary at or before `target`; elements are at most 8 bytes and chunks at
    // least 16, so it lies after `pos`.
    const std::int64_t es = element_[seg];
    ends_.push_back(begin_[seg] + (target - begin_[seg]) / es * es);
    pos = ends_.back();
  }
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
