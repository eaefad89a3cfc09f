#pragma once
// Elastic refit's repair step: what re-feeds a surviving rank whose data a dropped transfer was
// to bring (dropped because a rank that relayed it, or one it forwards from, is out).
//
// Every survivor ends an execution with the same ranks gone (membership.h), so each works out
// the same repair plan from the full plan alone: no rank needs another's buffers or boxes.
#include <vector>

#include "refit/executors/membership.h"
#include "refit/planner/plan.h"

namespace refit {

// For every dropped transfer into a destination rank not `excluded`, its segments again, each piece straight
// from the source rank its data started at (following `via` back to the source shard), with no
// relay: every segment of the repair plan is kFromSourceShard, every sender a source rank. A
// receiver is re-fed only when all of its dropped transfers can be: a piece that started at an
// excluded rank, or that a quantize step made, leaves that receiver out (its engine misses the
// step). Same world and tensors as `plan`; one transfer per (dropped transfer, starting rank), by
// receiver then plan order, with the dropped transfer's chunk size. Segments the receiver only relayed are
// re-sent whole too: only the receiver knows its destination boxes, and it keeps what it holds.
Plan repair_plan(const Plan& plan, const std::vector<bool>& excluded, const std::vector<bool>& dropped);

// How the engines came out of an execution and its repair step, `gone` every rank gone by the
// end: an engine misses the step when a rank of it is gone, a transfer of the full plan that was
// `dropped` landed in it on a rank the repair did not re-feed, or a transfer of the repair that
// was `repair_dropped` landed in it.
EngineOutcomes repaired_outcomes(const Plan& plan, const std::vector<bool>& dropped, const Plan& repair,
                                 const std::vector<bool>& repair_dropped, const EngineMembership& m,
                                 const std::vector<bool>& gone);

}  // namespace refit
