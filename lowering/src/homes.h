#pragma once
// The decisions behind a rank program, shared by lower_rank() (one rank, stored) and
// copy_costs() (every rank, reduced as they are made), so that the simulator costs exactly what
// the executors run.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "refit/lowering/rank_program.h"

namespace refit::lowering::detail {

struct ShardRef {
  std::int32_t index = -1;
  const Box* box = nullptr;
  const std::vector<Region>* regions = nullptr;  // null or empty: row-major in buffer `index`
};

// The array of `shard` that holds all of `x`: the shard's own buffer, or the region containing
// it; nothing when x spans several regions. Preconditions: the shard's box contains x.
std::optional<Located> array_holding(BufferKind side, const ShardRef& shard, const Box& x);
// The arrays of `shard` that hold part of `x`.
std::vector<Located> arrays_overlapping(BufferKind side, const ShardRef& shard, const Box& x);

// Finds a rank's shard of a tensor on one side (kSource or kDestination).
class ShardFinder {
 public:
  virtual ~ShardFinder() = default;
  virtual ShardRef find(Rank rank, BufferKind side, std::uint32_t tensor) const = 0;
};

// Where one rank keeps the segments it receives and finds those it sends. Transfers must be
// landed in plan order: scratch is handed out as forwarded ones arrive.
class Homes {
 public:
  Homes(const LoweredPlan& lowered, Rank rank, const ShardFinder& shards)
      : lowered_(&lowered), rank_(rank), shards_(&shards) {}

  // Where each segment of `t`, which this rank receives, lands.
  void land(const Transfer& t, std::vector<SegmentLanding>& out);
  // Where segment `k` of `t`, which this rank sends, is read from when one array holds all of it;
  // nothing when it is gathered from several received segments. Refuses data the rank does not
  // hold.
  [[nodiscard]] Result<std::optional<Located>> source(const Transfer& t, std::size_t k) const;

  Bytes scratch() const { return Bytes{scratch_}; }
  ReceivedSegments take_received() && { return std::move(received_); }

 private:
  const LoweredPlan* lowered_;
  Rank rank_;
  const ShardFinder* shards_;
  ReceivedSegments received_;
  std::int64_t scratch_ = 0;
};

// What piece `p` of segment `s` is read from in the regions of the rank's source shard.
std::vector<SourcePart> region_parts(const ShardRef& shard, const Segment& s, const Piece& p);

// The received segments that piece `p` of a gathered segment `s` (sent by `rank`) is read from.
[[nodiscard]] Result<std::vector<SourcePart>> gathered_parts(const LoweredPlan& lowered,
                                                             const ReceivedSegments& received, Rank rank,
                                                             const Segment& s, const Piece& p);

// One transfer seen from one side, where segment i lives in homes[i] (nullptr: not in one
// array): each segment's walk over its array is worked out once, when a chunk first reaches it,
// then every chunk is decided from it (a caller that stops early walks only what it decided).
class SideWalks {
 public:
  // `walks` is the caller's buffer, reused from one transfer to the next.
  using Buffer = std::vector<std::optional<Walk>>;
  SideWalks(const LoweredPlan& lowered, const Transfer& t, std::span<const Located* const> homes,
            Buffer& walks);

  // Whether every chunk is one run on this side, so in place under any rule: a message of one
  // segment that lies in one run of its array (each chunk is a piece of it).
  bool every_chunk_one_run() const;
  // How chunk k moves on this side.
  ChunkCopy decide(std::int64_t k, const ZeroCopyRule& rule) const;
  // The runs of chunk k, merged where they continue each other. Preconditions: every segment the
  // chunk touches has a home.
  std::vector<Run> runs(std::int64_t k) const;

 private:
  // Calls f(piece, walk, home) for each piece of chunk k; false when one is not in one array.
  template <class F>
  bool for_each_held_piece(std::int64_t k, F&& f) const;
  // Segment i's walk. Preconditions: homes_[i] is not null.
  const Walk& walk(std::size_t i) const;

  const MessageLayout& layout_;
  const Transfer& transfer_;
  std::span<const Located* const> homes_;
  Buffer& walks_;  // per segment: nullopt until walk() first needs it
};

}  // namespace refit::lowering::detail
