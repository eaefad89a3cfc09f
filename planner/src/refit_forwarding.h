#pragma once
// Forwarding between destination domains. A piece whose every holder sits behind one NIC must,
// without help, leave that NIC once per destination domain that needs it; when that makes the
// NIC busier than the most loaded receiver, some domains take the piece from another destination
// domain that already receives it instead, through that domain's landing NIC, which is otherwise
// idle on its send side. First only the domains one NIC feeds forward to each other; where a
// NIC is still far busier than the receivers, domains fed by other NICs (other source replicas)
// forward to its domains too, in trees grown afresh over all the domains that take a piece, as
// shallow as the forwarding NICs' room allows and never deeper than a binary tree over those
// domains. Every relay has a single upstream message, so a tree pipelines chunk by chunk.
#include <vector>

#include "refit/topology/rank_map.h"
#include "refit_pieces.h"

namespace refit::planner_detail {

// Rewrites assignments (setting relay_from) until no sending NIC is busier than the busiest
// receiving NIC, or nothing more can move: first among the domains one NIC feeds, then, where a
// NIC is still over, from domains other NICs feed. bytes[i] are assignment i's bytes. Returns
// whether the second step was taken (it joins parts that share no NIC: refit_parts.h).
bool forward_between_domains(std::vector<Assignment>& assignments, const PlacedCluster& cluster,
                             const std::vector<std::int64_t>& bytes);

}  // namespace refit::planner_detail
