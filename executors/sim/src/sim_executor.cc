#include "refit/executors/sim_executor.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/lowering/lowered_plan.h"

namespace refit {
namespace {

class SimPrepared final : public PreparedPlan {
 public:
  SimPrepared(Plan p, Rank r, std::int64_t m) : plan(std::move(p)), rank(r), messages(m) {}
  Plan plan;
  Rank rank;
  std::int64_t messages;                     // the rank's chunks as the lowering cuts its sends
  std::optional<PlanSimulation> simulation;  // of the first execute()
};

// Chunks `rank` puts: its messages as the lowering cuts them (what the simulation charged).
std::int64_t messages_of(const lowering::LoweredPlan& lowered, const Plan& plan, Rank rank) {
  std::int64_t messages = 0;
  for (const auto& t : plan.transfers)
    if (t.sender == rank) messages += lowered.layout(t.id).chunks();
  return messages;
}

// The rank's share of the plan: what it puts and what lands on it, relay hops included.
ExecutionReport rank_report(const SimPrepared& p, Seconds predicted) {
  ExecutionReport r{.bytes_sent = Bytes{0},
                    .bytes_received = Bytes{0},
                    .elapsed = predicted,
                    .messages = p.messages,
                    .stored_directly = Bytes{0}};
  for (const auto& t : p.plan.transfers) {
    if (t.sender == p.rank) r.bytes_sent += t.bytes;
    if (t.receiver == p.rank) r.bytes_received += t.bytes;
  }
  return r;
}

}  // namespace

Result<std::unique_ptr<PreparedPlan>> SimExecutor::prepare(const Plan& plan, Rank rank, const RankBuffers&) {
  // The plan check every executor makes (LoweredPlan::make), at the staging the simulation cuts
  // chunks by.
  const auto lowered = REFIT_TRY(lowering::LoweredPlan::make(plan, options_.staging));
  if (rank.value < 0 || rank.value >= plan.world_size())
    return out_of_range(
        fmt::format("rank {} is not one of the plan's {} ranks", rank.value, plan.world_size()));
  REFIT_TRY_IN(validate(plan, problem_), "the sim executor's plan");
  return std::make_unique<SimPrepared>(plan, rank, messages_of(lowered, plan, rank));
}

Result<ExecutionReport> SimExecutor::execute(PreparedPlan& prepared) {
  auto* p = dynamic_cast<SimPrepared*>(&prepared);
  if (p == nullptr) return invalid("execute: the plan was not prepared by the sim executor");
  if (!p->simulation) p->simulation = REFIT_TRY(simulate_plan(p->plan, problem_, cluster_, options_));
  last_ = p->simulation;
  return rank_report(*p, p->simulation->predicted);
}

}  // namespace refit
