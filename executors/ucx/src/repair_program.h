#pragma once
// The repair step's program on one rank (repair_plan.h), run against what the full plan
// registered at prepare: no new registration and no key exchange, since a dead rank could not
// take part in one.
#include "refit/core/error.h"
#include "refit/planner/plan.h"
#include "ucx_program.h"

namespace refit::ucx_detail {

// The program of `repair` (which must outlive it) over the same buffers as `prepared`: its
// regions are the prepared ones, and its staging slots as many as fit in the prepared staging
// regions. Errors name the rank and the bytes when a slot does not fit at all, or when the
// repair needs scratch (a repair plan forwards nothing, so it never should).
[[nodiscard]] Result<UcxProgram> make_repair_program(const Plan& repair, Rank rank,
                                                     const RankBuffers& buffers, const UcxProgram& prepared,
                                                     Bytes staging);

}  // namespace refit::ucx_detail
