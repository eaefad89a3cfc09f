#include "message_layout.h"

#include <algorithm>

namespace refit::nccl_detail {

MessageLayout::MessageLayout(const Plan& plan, const Transfer& t, std::int64_t max_chunk) {
  begin_.reserve(t.segments.size() + 1);
  begin_.push_back(0);
  for (const auto& s : t.segments) {
    element_.push_back(dtype_size(plan.tensors[s.tensor].dtype));
    begin_.push_back(begin_.back() + plan.segment_bytes(s).value);
  }
  const std::int64_t total = begin_.back();
  std::size_t seg = 0;
  for (std::int64_t pos = 0; pos < total;) {
    const std::int64_t target = pos + max_chunk;
    if (target >= total) {
      ends_.push_back(total);
      break;
    }
    while (begin_[seg + 1] <= target) ++seg;
    // The last element boundary at or before `target`; elements are at most 8 bytes and chunks
    // at least 16, so it lies after `pos`.
    const std::int64_t es = element_[seg];
    ends_.push_back(begin_[seg] + (target - begin_[seg]) / es * es);
    pos = ends_.back();
  }
}

std::int64_t MessageLayout::chunk_of(std::int64_t byte) const {
  return std::ranges::upper_bound(ends_, byte) - ends_.begin();
}

std::vector<Piece> MessageLayout::pieces(std::int64_t k) const {
  const std::int64_t lo = chunk_begin(k);
  const std::int64_t hi = chunk_end(k);
  std::vector<Piece> out;
  auto seg = static_cast<std::size_t>(std::ranges::upper_bound(begin_, lo) - begin_.begin()) - 1;
  for (; seg + 1 < begin_.size() && begin_[seg] < hi; ++seg) {
    const std::int64_t from = std::max(lo, begin_[seg]);
    const std::int64_t to = std::min(hi, begin_[seg + 1]);
    if (from >= to) continue;
    const std::int64_t es = element_[seg];
    out.push_back(
        Piece{static_cast<std::int32_t>(seg), (from - begin_[seg]) / es, (to - from) / es, from - lo});
  }
  return out;
}

}  // namespace refit::nccl_detail
