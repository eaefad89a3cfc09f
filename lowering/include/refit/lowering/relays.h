#pragma once
// Relays: a segment with `via` forwards data that an earlier transfer delivered to its sender,
// possibly gathered from several of that transfer's segments (gather-broadcast forwards whole
// tensors that arrived shard by shard). This finds, for part of a forwarded segment, which
// segments of the upstream transfer hold it.
#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "refit/core/error.h"
#include "refit/planner/plan.h"

namespace refit::lowering {

// The part `box` of a forwarded range that upstream segment `segment` delivered.
struct RelayPart {
  std::int32_t segment = 0;
  Box box;
};

class RelayIndex {
 public:
  explicit RelayIndex(const Plan& plan);

  // Whether a later transfer forwards data that transfer `t` delivered.
  bool forwarded(std::int32_t t) const { return forwarded_[static_cast<std::size_t>(t)]; }
  // An upstream segment of s.via holding all of s.box, when there is one (the usual relay).
  std::optional<std::int32_t> containing(const Segment& s) const;
  // The parts of elements [first, first + count) of `s`, one per upstream segment they meet.
  // Refuses a range that s.via does not deliver exactly once, naming the transfer.
  [[nodiscard]] Result<std::vector<RelayPart>> parts(const Segment& s, std::int64_t first,
                                                     std::int64_t count) const;

 private:
  std::span<const std::int32_t> candidates(const Segment& s) const;

  const Plan& plan_;
  // Per transfer: tensor -> its segments of that tensor.
  std::vector<std::unordered_map<std::uint32_t, std::vector<std::int32_t>>> by_tensor_;
  std::vector<bool> forwarded_;
};

}  // namespace refit::lowering
