#pragma once
// A plan of parts that are copies of one part with their ranks shifted (refit_parts.h), made from
// that part's plan alone. Plan order is by (phase, round, sender) (PlanBuilder::finish), and the
// copies share no rank, so the plan of them all is their transfers merged by that key: the plan
// planning them together makes, transfer for transfer, ids and `via`s included.
#include <cstdint>
#include <span>

#include "refit/planner/plan.h"
#include "refit_parts.h"

namespace refit::planner_detail {

// `part`: the first part's plan; `rounds`: its transfers' phase << 32 | round; `shifts`: every
// part's, the first's included.
Plan expand_copies(Plan part, std::span<const std::uint64_t> rounds, std::span<const RankShift> shifts);

}  // namespace refit::planner_detail
