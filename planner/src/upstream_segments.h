#pragma once
// Which segment of an upstream message a relay segment forwards, for the plan builder's arrival
// order: the upstream segment with the very box (a relay is made from the segment it forwards),
// else the first one that contains it (a relay cut into row slabs). The segments of all upstream
// messages are indexed in one array, each message's entries contiguous and sorted by a digest of
// the box, so that a lookup is a binary search among its own message's few entries: a hash map per
// message cost an allocation per segment, and one table for all a cache miss per lookup.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "refit/planner/plan.h"

namespace refit::planner_detail {

class UpstreamSegments {
 public:
  // Indexes the segments of upstream message `message`. Messages are added in increasing order,
  // each once; those not added have nothing indexed.
  void add(std::int32_t message, std::span<const Segment> segments);
  // The segment of `segments` (those of `message`, as added) holding all of s.box of s.tensor;
  // nothing when none does.
  std::optional<std::size_t> holding(std::int32_t message, std::span<const Segment> segments,
                                     const Segment& s) const;

 private:
  struct Entry {
    std::uint64_t digest;
    std::uint32_t segment;
    auto operator<=>(const Entry&) const = default;
  };
  static std::uint64_t digest(const Segment& s);

  std::vector<Entry> entries_;
  std::vector<std::size_t> first_;  // message m's entries: [first_[m], first_[m + 1])
};

}  // namespace refit::planner_detail
