#pragma once
// Elastic refit when the membership is known before the step (between steps, as a step-paced
// executor such as NCCL's needs it: every process posts its whole schedule up front, so nothing
// can be dropped once the step runs). The step's plan is then derived from the full plan alone,
// with membership.h's drop rule and repair_plan.h's re-feed: what the full plan sends to or from a
// non-member engine, and everything that forwards such data, is left out, and a member whose data
// came through a non-member gets it straight from the training rank that held it, as part of the
// same step. Every process derives the same plan, so they agree on it as on the full plan.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/membership.h"
#include "refit/planner/plan.h"

namespace refit {

inline constexpr std::int32_t kRefed = -1;

struct MemberStep {
  // The full plan's transfers that are not dropped, in plan order (ids renumbered, vias
  // following), then the re-fed ones (every segment from a source shard). No transfer has a
  // rank of a non-member engine as sender or receiver.
  Plan plan;
  std::vector<std::int32_t> full_id;  // per transfer of `plan`: its id in the full plan, or kRefed
  EngineOutcomes engines;             // a member misses the step when some of its data cannot be re-fed
};

// `gone`, by rank: ranks known dead before the step (a communicator shrunk without them); their
// engines miss the step, and a gone training rank takes out what only it held (membership.h's
// excluded_ranks). Refuses, naming the rank or engine, a membership or a `gone` that does not fit
// the plan's world (check_engine_membership).
[[nodiscard]] Result<MemberStep> member_step(const Plan& plan, const EngineMembership& m,
                                             const std::vector<bool>& gone);

}  // namespace refit
