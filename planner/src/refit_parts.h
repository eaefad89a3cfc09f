#pragma once
// The refit strategy's independent parts, and whether they are copies of one another. Each piece
// a domain group takes comes from the group's share of its holders (holder_share) or from holders
// inside the group's domain; ranks that share a NIC or a GPU share load. Ranks joined by any of
// these form a part, and parts cannot touch each other's choices. A plan of source replicas that
// each serve their own engines has one part per replica, and the parts are the same up to a shift
// of the ranks on each side: then planning the first alone and shifting it gives every other's.
//
// "The same" is checked in full, on everything the strategy reads of a part: per rank, shifted by
// the part's first rank of its side, its GPU, NIC and domain numbered by their order among the
// part's (the strategy breaks ties by NIC order), its NIC's bandwidth; per domain group, its tensor,
// shard, shifted replicas and per piece its shifted share of holders; per source shard, its shifted
// holders in the part. The rotation counts from each part's first rank of a side
// (rotation_origin.h) and everything else the strategy weighs (bytes, chunk, moved bytes) is the
// problem's, so equal records plan alike.
#include <cstdint>
#include <optional>
#include <vector>

#include "refit_pieces.h"
#include "strategies.h"

namespace refit::planner_detail {

// How far a part's ranks lie from the first part's, per side.
struct RankShift {
  std::int32_t source = 0;
  std::int32_t destination = 0;
};

struct PartCopies {
  DomainGroups first;             // the domain groups of the first part (the others' emptied)
  std::vector<RankShift> shifts;  // per part, in order of their first domain group; the first's is 0
};

// Nothing when the problem is one part or its parts are not all copies of the first.
std::optional<PartCopies> copies_of_first_part(const PlanContext& c, const DomainGroups& groups);

// Per rank, its part (-1: in none: a rank no domain group of `groups` reaches), parts numbered in
// order of their first domain group.
std::vector<std::int32_t> parts_of_ranks(const PlanContext& c, const DomainGroups& groups);

}  // namespace refit::planner_detail
