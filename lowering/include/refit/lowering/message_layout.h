#pragma once
// The one chunk rule. A transfer's segments travel back to back (plan.h), cut into chunks of at
// most chunk_limit() bytes that end on element boundaries, so every piece of a chunk is whole
// elements of one segment. Sender and receiver, every executor and the simulator cut the same
// way from the plan alone.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "refit/core/units.h"
#include "refit/planner/plan.h"

namespace refit::lowering {

// Staging slots, chunks and in-place receives are aligned to this many bytes.
inline constexpr std::int64_t kAlign = 16;
constexpr std::int64_t align_up(std::int64_t bytes) { return (bytes + kAlign - 1) / kAlign * kAlign; }

// Bytes per chunk: the transfer's own chunk (the whole message when it has none), at most half the
// staging (the other half packs the next chunk meanwhile), rounded down to kAlign, at least kAlign.
// Preconditions: staging >= 2 * kAlign.
std::int64_t chunk_limit(const Transfer& t, Bytes staging);

// Elements [first, first + count) of one segment (row-major in its box), `offset` bytes into the
// chunk that carries them.
struct Piece {
  std::int32_t segment = 0;
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t offset = 0;
};

class MessageLayout {
 public:
  MessageLayout(const Plan& plan, const Transfer& t, std::int64_t limit);
  // What chunks() would be, without keeping the cuts: O(segments) memory.
  static std::int64_t count_chunks(const Plan& plan, const Transfer& t, std::int64_t limit);

  std::int64_t chunks() const { return static_cast<std::int64_t>(ends_.size()); }
  std::int64_t bytes() const { return begin_.back(); }
  std::int64_t chunk_begin(std::int64_t k) const {
    return k == 0 ? 0 : ends_[static_cast<std::size_t>(k - 1)];
  }
  std::int64_t chunk_end(std::int64_t k) const { return ends_[static_cast<std::size_t>(k)]; }
  std::int64_t chunk_bytes(std::int64_t k) const { return chunk_end(k) - chunk_begin(k); }
  // The chunk that carries message byte `byte`.
  std::int64_t chunk_of(std::int64_t byte) const;

  std::int32_t segments() const { return static_cast<std::int32_t>(element_.size()); }
  std::int64_t segment_offset(std::int32_t s) const { return begin_[static_cast<std::size_t>(s)]; }
  std::int64_t element_size(std::int32_t s) const { return element_[static_cast<std::size_t>(s)]; }
  std::vector<Piece> pieces(std::int64_t k) const;
  // Calls f(const Piece&) for each piece of chunk k, in message order.
  template <class F>
  void for_each_piece(std::int64_t k, F&& f) const;

 private:
  std::vector<std::int64_t> begin_;    // per segment, and the message size at the end
  std::vector<std::int64_t> element_;  // per segment
  std::vector<std::int64_t> ends_;     // per chunk
};

template <class F>
void MessageLayout::for_each_piece(std::int64_t k, F&& f) const {
  const std::int64_t lo = chunk_begin(k);
  const std::int64_t hi = chunk_end(k);
  auto seg = static_cast<std::size_t>(std::ranges::upper_bound(begin_, lo) - begin_.begin()) - 1;
  for (; seg + 1 < begin_.size() && begin_[seg] < hi; ++seg) {
    const std::int64_t from = std::max(lo, begin_[seg]);
    const std::int64_t to = std::min(hi, begin_[seg + 1]);
    if (from >= to) continue;
    const std::int64_t es = element_[seg];
    f(Piece{.segment = static_cast<std::int32_t>(seg),
            .first = (from - begin_[seg]) / es,
            .count = (to - from) / es,
            .offset = from - lo});
  }
}

}  // namespace refit::lowering
