#pragma once
// Where a sender's rotation counts from (plan_builder.cc: sender s walks its receivers starting
// at its (s - origin) mod n-th). Ranks that exchange no message, directly or through others,
// form independent parts of a plan; counting each part's senders from the first rank of its own
// side (training or inference) in that part, instead of from rank 0, gives parts that are the
// same up to a shift of their ranks (source replicas serving their own engines) the same order,
// so the simulator can simulate them once. A plan of one part keeps the plain `s mod n`.
#include <cstdint>
#include <span>
#include <utility>
#include <vector>

namespace refit::planner_detail {

// Per rank of [0, world): the amount to subtract from it before the rotation's modulo: the
// first rank of its side in its part, less the first rank of its side (0 or `source_ranks`).
// `pairs` are the plan's (from, to) messages.
std::vector<std::int32_t> rotation_origins(std::span<const std::pair<std::int32_t, std::int32_t>> pairs,
                                           std::int32_t source_ranks, std::int32_t world);

}  // namespace refit::planner_detail
