#pragma once
// How one transfer travels: its segments back to back (plan.h), cut into chunks of at most
// `max_chunk` bytes that end on element boundaries, so every piece of a chunk is whole elements
// of one segment. Sender and receiver compute the same cut from the plan alone.
#include <cstdint>
#include <vector>

#include "refit/planner/plan.h"

namespace refit::nccl_detail {

// Elements [first, first + count) of one segment (row-major in its box), `offset` bytes into
// the chunk that carries them.
struct Piece {
  std::int32_t segment = 0;
  std::int64_t first = 0;
  std::int64_t count = 0;
  std::int64_t offset = 0;
};

class MessageLayout {
 public:
  MessageLayout(const Plan& plan, const Transfer& t, std::int64_t max_chunk);

  std::int64_t chunks() const { return static_cast<std::int64_t>(ends_.size()); }
  std::int64_t chunk_begin(std::int64_t k) const {
    return k == 0 ? 0 : ends_[static_cast<std::size_t>(k - 1)];
  }
  std::int64_t chunk_end(std::int64_t k) const { return ends_[static_cast<std::size_t>(k)]; }
  std::int64_t chunk_bytes(std::int64_t k) const { return chunk_end(k) - chunk_begin(k); }
  // The chunk that carries message byte `byte`.
  std::int64_t chunk_of(std::int64_t byte) const;

  std::int64_t segment_offset(std::int32_t s) const { return begin_[static_cast<std::size_t>(s)]; }
  std::int64_t element_size(std::int32_t s) const { return element_[static_cast<std::size_t>(s)]; }
  std::vector<Piece> pieces(std::int64_t k) const;

 private:
  std::vector<std::int64_t> begin_;    // per segment, and the message size at the end
  std::vector<std::int64_t> element_;  // per segment
  std::vector<std::int64_t> ends_;     // per chunk
};

}  // namespace refit::nccl_detail
