#pragma once
// The overlap algebra: which pieces of which source shards each destination shard needs.
// Everything in the planner is built on this pure function.
#include <cstdint>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/error.h"
#include "refit/core/layout.h"

namespace refit {

// A distinct box of a layout and every rank holding it (replicas), in mesh row-major order.
struct Shard {
  Box box;
  std::vector<Rank> holders;
};

// Part of a destination shard that lies inside one source shard.
struct Piece {
  Box box;                   // global coordinates; never empty
  std::uint32_t source = 0;  // index into Overlap::sources
};

struct DestinationShard {
  Shard shard;                // the destination box and every rank that needs it
  std::vector<Piece> pieces;  // disjoint, covering shard.box exactly, in source order
};

struct Overlap {
  std::vector<Shard> sources;                  // non-empty source shards
  std::vector<DestinationShard> destinations;  // non-empty destination shards

  // The pieces that destination rank `r` needs (empty when it holds nothing of the tensor).
  const DestinationShard* destination_of(Rank r) const;
  const std::vector<Rank>& holders(const Piece& p) const { return sources[p.source].holders; }
};

// The distinct non-empty boxes of a layout with their holders.
std::vector<Shard> distinct_shards(const Layout& layout);

// Both layouts must describe the same tensor shape.
[[nodiscard]] Result<Overlap> overlaps(const Layout& src, const Layout& dst);

}  // namespace refit
