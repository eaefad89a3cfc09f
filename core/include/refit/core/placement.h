#pragma once
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"

namespace refit {

// One per mesh axis: the tensor is either replicated along the axis or split along tensor dim `dim`.
struct Placement {
  enum class Kind : std::uint8_t { kReplicate, kShard };
  Kind kind = Kind::kReplicate;
  int dim = 0;

  static constexpr Placement replicate() { return Placement{Kind::kReplicate, 0}; }
  static constexpr Placement shard(int d) { return Placement{Kind::kShard, d}; }
  bool is_shard() const { return kind == Kind::kShard; }
  bool operator==(const Placement&) const = default;
  std::string to_string() const;  // "R" or "S<dim>"
};

// "S0", "R" (case-insensitive; "Shard(0)" and "Replicate()" are accepted too).
[[nodiscard]] Result<Placement> parse_placement(std::string_view text);
[[nodiscard]] Result<std::vector<Placement>> parse_placements(std::string_view comma_separated);

}  // namespace refit
