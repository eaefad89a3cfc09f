#include "refit/executors/sim_executor.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/lowering/lowered_plan.h"

namespace refit {
namespace {

class SimPrepared final : public PreparedPlan {
 public:
  SimPrepared(Plan p, Rank r) : plan(std::move(p)), rank(r) {}
  Plan plan;
  Rank rank;
  std::optional<PlanSimulation> simulation;  // of the first execute()
};

// The rank's share of the plan: what it puts and what lands on it, relay hops included, and its
// messages as the lowering cuts them (what the simulation charged).
ExecutionReport rank_report(const Plan& plan, Rank rank, Seconds predicted) {
  const auto lowered = lowering::LoweredPlan::make(plan, lowering::kDefaultStaging);
  ExecutionReport r{.bytes_sent = Bytes{0},
                    .bytes_received = Bytes{0},
                    .elapsed = predicted,
                    .messages = 0,
                    .stored_directly = Bytes{0}};
  for (const auto& t : plan.transfers) {
    if (t.sender == rank) {
      r.bytes_sent += t.bytes;
      r.messages += lowered ? lowered->layout(t.id).chunks() : 0;
    }
    if (t.receiver == rank) r.bytes_received += t.bytes;
  }
  return r;
}

}  // namespace

Result<std::unique_ptr<PreparedPlan>> SimExecutor::prepare(const Plan& plan, Rank rank, const RankBuffers&) {
  REFIT_TRY(validate_structure(plan));
  if (rank.value < 0 || rank.value >= plan.world_size())
    return out_of_range(
        fmt::format("rank {} is not one of the plan's {} ranks", rank.value, plan.world_size()));
  REFIT_TRY_IN(validate(plan, problem_), "the sim executor's plan");
  return std::make_unique<SimPrepared>(plan, rank);
}

Result<ExecutionReport> SimExecutor::execute(PreparedPlan& prepared) {
  auto* p = dynamic_cast<SimPrepared*>(&prepared);
  if (p == nullptr) return invalid("execute: the plan was not prepared by the sim executor");
  if (!p->simulation) p->simulation = REFIT_TRY(simulate_plan(p->plan, problem_, cluster_, options_));
  last_ = p->simulation;
  return rank_report(p->plan, p->rank, p->simulation->predicted);
}

}  // namespace refit
