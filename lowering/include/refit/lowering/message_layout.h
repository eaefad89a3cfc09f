#pragma once
// The one chunk rule. A transfer's segments travel back to back (plan.h), cut into chunks of at
// most chunk_limit() bytes that end on element boundaries, so every piece of a chunk is whole
// elements of one segment. Sender and receiver, every executor and the simulator cut the same
// way from the plan alone.
#include <algorithm>
#include <cstdint>
#include <span>
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

  std::int64_t chunks() const { return chunks_; }
  std::int64_t bytes() const { return begins()[segments_]; }
  std::int64_t chunk_begin(std::int64_t k) const { return k == 0 ? 0 : chunk_end(k - 1); }
  std::int64_t chunk_end(std::int64_t k) const {
    return stored_ends() ? data_[2 * segments_ + 1 + static_cast<std::size_t>(k)]
                         : std::min((k + 1) * limit_, bytes());
  }
  std::int64_t chunk_bytes(std::int64_t k) const { return chunk_end(k) - chunk_begin(k); }
  // The chunk that carries message byte `byte`.
  std::int64_t chunk_of(std::int64_t byte) const;

  std::int32_t segments() const { return static_cast<std::int32_t>(segments_); }
  std::int64_t segment_offset(std::int32_t s) const { return begins()[static_cast<std::size_t>(s)]; }
  std::int64_t element_size(std::int32_t s) const { return elements()[static_cast<std::size_t>(s)]; }
  std::vector<Piece> pieces(std::int64_t k) const;
  // Calls f(const Piece&) for each piece of chunk k, in message order.
  template <class F>
  void for_each_piece(std::int64_t k, F&& f) const;

 private:
  // One allocation per transfer (a plan has up to millions): each segment's first byte in the
  // message and the message size after them, each segment's element size, then each chunk's end
  // unless every chunk but the last is `limit_` bytes (chunk k ends at min((k + 1) * limit_,
  // bytes())): most messages, and the tens of millions of chunks of an m2n-ring plan.
  std::span<const std::int64_t> begins() const { return {data_.data(), segments_ + 1}; }
  std::span<const std::int64_t> elements() const { return {data_.data() + segments_ + 1, segments_}; }
  bool stored_ends() const { return data_.size() > 2 * segments_ + 1; }

  std::size_t segments_ = 0;
  std::int64_t limit_ = 0;
  std::int64_t chunks_ = 0;
  std::vector<std::int64_t> data_;
};

template <class F>
void MessageLayout::for_each_piece(std::int64_t k, F&& f) const {
  const std::int64_t lo = chunk_begin(k);
  const std::int64_t hi = chunk_end(k);
  const auto begin = begins();
  const auto element = elements();
  auto seg = static_cast<std::size_t>(std::ranges::upper_bound(begin, lo) - begin.begin()) - 1;
  for (; seg + 1 < begin.size() && begin[seg] < hi; ++seg) {
    const std::int64_t from = std::max(lo, begin[seg]);
    const std::int64_t to = std::min(hi, begin[seg + 1]);
    if (from >= to) continue;
    const std::int64_t es = element[seg];
    f(Piece{.segment = static_cast<std::int32_t>(seg),
            .first = (from - begin[seg]) / es,
            .count = (to - from) / es,
            .offset = from - lo});
  }
}

}  // namespace refit::lowering
