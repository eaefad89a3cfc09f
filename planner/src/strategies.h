#pragma once
// The strategies behind make_plan(); each lives in its own file.
#include <vector>

#include "refit/core/overlap.h"
#include "refit/planner/strategy.h"

namespace refit::planner_detail {

struct PlanContext {
  const ReshardProblem& problem;
  const PlacedCluster& cluster;
  const StrategyInfo& strategy;
  const PlanOptions& options;
  std::vector<Overlap> overlaps;  // one per tensor, in problem order
};

// Weights quantized at their landing ranks (landing_plan.cc): the strategy plans what reaches the
// landing ranks, then what leaves them, with each landing rank's quantize step in between.
bool has_landing(const ReshardProblem& problem);
[[nodiscard]] Result<Plan> plan_with_landing(const PlanContext& c);

// Plans the first of the problem's independent parts alone where every part is a copy of it with
// its ranks shifted (refit_parts.h), and lays it out for every part; the whole plan otherwise. The
// plan is plan_refit_whole's, transfer for transfer.
[[nodiscard]] Result<Plan> plan_refit(const PlanContext& c);
[[nodiscard]] Result<Plan> plan_refit_whole(const PlanContext& c);
[[nodiscard]] Result<Plan> plan_direct(const PlanContext& c);
[[nodiscard]] Result<Plan> plan_m2n_ring(const PlanContext& c);
[[nodiscard]] Result<Plan> plan_gather_broadcast(const PlanContext& c);

// NCCL M2N's UNIFORM balancing between n_sources replicas of a piece and n_dests replicas of a
// destination shard: the source replica that serves destination replica i. With more sources
// than destinations, sources form n_dests contiguous groups and the first of each sends; with
// fewer, source j serves the contiguous range [j*ceil(d/s), (j+1)*ceil(d/s)).
std::int64_t uniform_source(std::int64_t n_sources, std::int64_t n_dests, std::int64_t dest_index);

}  // namespace refit::planner_detail
