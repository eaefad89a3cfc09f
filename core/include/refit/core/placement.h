#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"

namespace refit {

// One per mesh axis: the tensor is either replicated along the axis or split along tensor dim `dim`.
// A split cuts like torch.chunk (parts of ceil(L/n)) unless it names its chunk: then part i is
// [start + i*chunk, start + (i+1)*chunk) clipped to [0, L), `start` <= 0 shifting the grid so that
// leading parts may be short or empty. Frameworks that pad a dim before splitting it store it so:
// Megatron's padded vocabulary gives every rank Vp/tp rows of which the real ones are a prefix, and
// a block-quantized weight's scales split at the weight's cut divided by the block. A fused tensor
// split evenly shifts the grid of the tensors inside it: Megatron's linear_qkv of one query group,
// [q heads; k; v] cut into parts of s rows, gives the k rows from q's end on, at start -(q rows).
struct Placement {
  enum class Kind : std::uint8_t { kReplicate, kShard };
  Kind kind = Kind::kReplicate;
  int dim = 0;
  std::int64_t chunk = 0;  // elements per part of a split; 0: torch.chunk's ceil(L/n)
  std::int64_t start = 0;  // with a chunk: where part 0 begins, <= 0

  static constexpr Placement replicate() { return Placement{.kind = Kind::kReplicate}; }
  static constexpr Placement shard(int d) { return Placement{.kind = Kind::kShard, .dim = d}; }
  static constexpr Placement shard(int d, std::int64_t chunk, std::int64_t start = 0) {
    return Placement{.kind = Kind::kShard, .dim = d, .chunk = chunk, .start = start};
  }
  bool is_shard() const { return kind == Kind::kShard; }
  bool operator==(const Placement&) const = default;
  std::string to_string() const;  // "R", "S<dim>", "S<dim>:<chunk>" or "S<dim>:<chunk>@<start>"
};

// "S0", "S0:128", "S0:192@-512", "R" (case-insensitive; "Shard(0)" and "Replicate()" are accepted too).
[[nodiscard]] Result<Placement> parse_placement(std::string_view text);
[[nodiscard]] Result<std::vector<Placement>> parse_placements(std::string_view comma_separated);

}  // namespace refit
