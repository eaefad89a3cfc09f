#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"

namespace refit {

// One per mesh axis: the tensor is either replicated along the axis or split along tensor dim `dim`.
// A split cuts like torch.chunk (parts of ceil(L/n)) unless it names its chunk: then part i is
// [min(i*chunk, L), min((i+1)*chunk, L)). Frameworks that pad a dim before splitting it store it so:
// Megatron's padded vocabulary gives every rank Vp/tp rows of which the real ones are a prefix, and
// a block-quantised weight's scales split at the weight's cut divided by the block.
struct Placement {
  enum class Kind : std::uint8_t { kReplicate, kShard };
  Kind kind = Kind::kReplicate;
  int dim = 0;
  std::int64_t chunk = 0;  // elements per part of a split; 0: torch.chunk's ceil(L/n)

  static constexpr Placement replicate() { return Placement{.kind = Kind::kReplicate}; }
  static constexpr Placement shard(int d) { return Placement{.kind = Kind::kShard, .dim = d}; }
  static constexpr Placement shard(int d, std::int64_t chunk) {
    return Placement{.kind = Kind::kShard, .dim = d, .chunk = chunk};
  }
  bool is_shard() const { return kind == Kind::kShard; }
  bool operator==(const Placement&) const = default;
  std::string to_string() const;  // "R", "S<dim>" or "S<dim>:<chunk>"
};

// "S0", "S0:128", "R" (case-insensitive; "Shard(0)" and "Replicate()" are accepted too).
[[nodiscard]] Result<Placement> parse_placement(std::string_view text);
[[nodiscard]] Result<std::vector<Placement>> parse_placements(std::string_view comma_separated);

}  // namespace refit
