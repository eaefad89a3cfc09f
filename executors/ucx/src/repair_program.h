#pragma once
// The repair step's program on one rank (repair_plan.h), run against what the full plan
// registered at prepare: no new registration and no key exchange, since a dead rank could not
// take part in one.
#include "refit/core/error.h"
#include "refit/planner/plan.h"
#include "ucx_program.h"

namespace refit::ucx_detail {

// Elastic refit, at prepare: a repair step re-sends a rank whole the segments it only relayed,
// which land partly in its boxes and are unpacked from a receive staging slot, and it cannot
// register a slot then. So the receive staging region holds at least one slot of the largest
// chunk the rank receives in the full plan (a repair cuts no chunk larger).
void reserve_repair_staging(UcxProgram& prepared);

// The program of `repair` (which must outlive it) over the same buffers as `prepared`: its
// regions are the prepared ones, and its staging slots as many as fit in the prepared staging
// regions; where one would not fit at all, every chunk of the rank moves in place. Errors name
// the rank and the bytes when a slot is still needed and does not fit (a chunk not held in one
// place), or when the repair needs scratch (a repair plan forwards nothing, so it never should).
[[nodiscard]] Result<UcxProgram> make_repair_program(const Plan& repair, Rank rank,
                                                     const RankBuffers& buffers, const UcxProgram& prepared,
                                                     Bytes staging);

}  // namespace refit::ucx_detail
