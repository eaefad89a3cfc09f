#pragma once
// Relays: a segment with `via` forwards data that an earlier transfer delivered to its sender,
// possibly gathered from several of that transfer's segments (gather-broadcast forwards whole
// tensors that arrived shard by shard). This finds, for part of a forwarded segment, which
// segments of the upstream transfer hold it.
#include <cstdint>
#include <optional>
#include <span>
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
  struct Entry;
  std::span<const Entry> candidates(const Segment& s) const;

  // A segment of a forwarded transfer, by tensor.
  struct Entry {
    std::uint32_t tensor = 0;
    std::int32_t segment = 0;
    auto operator<=>(const Entry&) const = default;
  };

  const Plan& plan_;
  std::vector<bool> forwarded_;
  // Per transfer: its segments sorted by tensor (empty for transfers nobody forwards).
  std::vector<std::vector<Entry>> by_tensor_;
  // Per transfer: its segments sorted by (tensor, box), for finding the upstream segment that is
  // the very box a relay forwards (the usual relay) by a binary search in the transfer's own
  // segments (a hash table over every plan's segments missed the cache on each look-up).
  std::vector<std::vector<std::int32_t>> by_box_;
};

}  // namespace refit::lowering
