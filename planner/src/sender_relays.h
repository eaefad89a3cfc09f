#pragma once
// Sending through a neighbour's NIC. A domain whose ranks send unevenly (pipeline stages of
// unequal bytes, one holder beside idle inference ranks, one slow NIC) leaves some of its NICs
// busier than the rest. Where a NIC would send for longer than the domain's NICs take on average
// (and than the busiest receiving NIC takes in), part of what it sends first hops over NVLink to
// a rank of the part behind a NIC with room, which sends it on: the M2N ring's forwarding through
// inference ranks, chosen by load.
#include <cstdint>
#include <deque>
#include <functional>
#include <vector>

#include "refit/core/box.h"
#include "refit/topology/rank_map.h"
#include "refit_pieces.h"

namespace refit::planner_detail {

// A sending NIC counts as busier than its domain's level past this fraction of it: an NVLink hop
// costs a little time and memory at the rank it lands on, not worth a few per cent.
inline constexpr double kSenderRelayMargin = 0.05;

// What relay_at_senders needs of the problem: bytes per element by tensor, the smallest piece to
// cut, and whether a rank holds or needs part of a box (a hop there would land in its own boxes).
struct RelayCuts {
  std::vector<std::int64_t> element_size;  // by problem tensor
  double min_split = kMinSplitBytes;       // moved bytes
  std::function<bool(std::uint32_t tensor, Rank rank, const Box& box)> touches;
};

// Rewrites `assignments` (with `bytes`, their moved bytes) so that within each domain the NICs of
// a part's ranks (`part_of()`, by rank: refit_parts.h's parts_of_ranks, -1 for a rank in none,
// asked for only where some NIC is busier than the busiest receiver) send
// about evenly: an assignment moved whole, or the head rows of one cut by `cuts`, is sent by a
// relay of the sender's part that an NVLink hop (Assignment::hop) feeds, so that parts stay apart
// and a part planned alone plans as it does in the whole. New row blocks are kept in `boxes`.
// Assignments already forwarded stay; those that feed others move whole or not at all.
void relay_at_senders(std::vector<Assignment>& assignments, std::vector<std::int64_t>& bytes,
                      std::deque<Box>& boxes, const std::function<std::vector<std::int32_t>()>& part_of,
                      const PlacedCluster& cluster, const RelayCuts& cuts);

}  // namespace refit::planner_detail
