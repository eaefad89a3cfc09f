#pragma once
// One chunk seen from one side. A chunk whose bytes lie in one contiguous run of a buffer is sent
// from there, or received there, as it is (no copy). Otherwise it goes through staging: the
// sender packs its pieces there first, the receiver unpacks them afterwards.
#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "storage.h"

namespace refit::nccl_detail {

// Hands out staging for one chunk on one side.
using StagingAllocator = std::function<Address(std::int64_t bytes)>;

struct ChunkSide {
  Address at;                  // what ncclSend reads or ncclRecv writes
  std::vector<CopyOp> copies;  // the sender's packs, or the receiver's unpacks and extracts
};

class ChunkSides {
 public:
  ChunkSides(const Plan& plan, const Storage& storage) : plan_(plan), storage_(storage) {}

  Result<ChunkSide> send(std::int32_t slot, const Transfer& t, const MessageLayout& layout, std::int64_t k,
                         const StagingAllocator& staging) const;
  ChunkSide receive(std::int32_t slot, const Transfer& t, const MessageLayout& layout, std::int64_t k,
                    const StagingAllocator& staging) const;

 private:
  std::int64_t element_size(const Segment& s) const { return dtype_size(plan_.tensors[s.tensor].dtype); }
  // The piece's elements as they sit in a staging chunk starting at `chunk`.
  Stored in_staging(const Address& chunk, const Segment& s, const Piece& p) const;
  // Copies of the piece's elements that fall in `dest` (a destination shard holding only part of
  // the segment) out of `from`.
  void extract(const Located& from, const Located& dest, const Segment& s, const Piece& p,
               std::vector<CopyOp>& out) const;

  const Plan& plan_;
  const Storage& storage_;
};

// Where a run of pieces lies when it is one contiguous run of one buffer.
class RunJoiner {
 public:
  // Appends the next piece's run; false once the pieces stop being one run.
  bool add(const Located& array, const Box& box, std::int64_t first, std::int64_t count, std::int64_t es);
  Address start() const { return start_; }

 private:
  bool started_ = false;
  Address start_;
  std::int64_t end_ = 0;
};

}  // namespace refit::nccl_detail
