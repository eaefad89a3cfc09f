#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"

#include "plan_model.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/simulator/simulate.h"
#include "refit/simulator/trace_writer.h"

namespace refit {
namespace {

constexpr const char* kKindNames[] = {"network", "nvlink", "copy"};

// The engine splits the critical path into latency and flow time per category; the latency part
// of each step that is pack/unpack time is reported as such.
void fill_breakdown(PlanSimulation& out, const sim::PlanModel& pm, const sim::SimulationResult& r) {
  Seconds* slots[] = {&out.network, &out.nvlink, &out.copy};
  for (std::size_t k = 0; k < r.breakdown.by_category.size() && k < 3; ++k)
    *slots[k] = r.breakdown.by_category[k];
  for (const auto& step : r.critical_path) {
    const auto t = static_cast<std::size_t>(step.task.value);
    const double waited = std::max(0.0, (r.tasks[t].start - step.from).value);
    out.pack += Seconds{std::min(pm.copy_latency[t].value, waited)};
  }
  out.latency = r.breakdown.latency - out.pack;
}

void fill_resources(PlanSimulation& out, const sim::Model& m, const sim::SimulationResult& r) {
  for (std::int32_t i = 0; i < m.resource_count(); ++i) {
    const auto& u = r.resources[static_cast<std::size_t>(i)];
    if (u.bytes.value > 0)
      out.resources.push_back(ResourceReport{m.resource_name(sim::ResourceId{i}), u.bytes, u.utilisation});
  }
}

void fill_critical_path(PlanSimulation& out, const sim::PlanModel& pm, const sim::SimulationResult& r) {
  for (const auto& step : r.critical_path) {
    const auto t = static_cast<std::size_t>(step.task.value);
    out.critical_path.push_back(CriticalTransfer{
        pm.transfer_of_task[t], kKindNames[pm.model.category(step.task)], step.from, r.tasks[t].end});
  }
}

}  // namespace

Result<PlanSimulation> simulate_plan(const Plan& plan, const ReshardProblem& problem,
                                     const PlacedCluster& cluster, const PlanSimulationOptions& options) {
  if (cluster.ranks().rank_count() < plan.world_size())
    return mismatch(fmt::format("the plan has {} ranks, cluster '{}' places {}", plan.world_size(),
                                cluster.name(), cluster.ranks().rank_count()));
  REFIT_TRY(validate_structure(plan));
  const ExecutionModel& execution = options.execution ? *options.execution : execution_model(plan.execution);
  const auto window = options.window.value_or(execution.pair_window);
  if (window < 0) return out_of_range(fmt::format("window must be >= 0 chunks, got {}", window));
  const auto pm = REFIT_TRY(sim::build_plan_model(plan, problem, cluster, execution, window));
  const sim::SimulateOptions so{
      .progress = options.progress, .rate_tolerance = options.rate_tolerance, .instant = options.instant};
  const auto r = REFIT_TRY(sim::simulate(pm.model, so));
  PlanSimulation out{.predicted = r.makespan, .tasks = pm.model.task_count(), .events = r.events};
  fill_breakdown(out, pm, r);
  fill_resources(out, pm.model, r);
  fill_critical_path(out, pm, r);
  if (options.trace) REFIT_TRY(sim::write_chrome_trace(pm.model, r, *options.trace));
  return out;
}

}  // namespace refit
