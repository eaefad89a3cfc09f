#include "refit/simulator/component_simulation.h"
#include "refit/core/index.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "component_resources.h"
#include "component_signature.h"
#include "plan_components.h"
#include "refit/core/try.h"

namespace refit {
namespace {

// Components grouped by signature: the first is the representative, simulated for all of them.
using Alike = std::vector<std::size_t>;

// Components by signature. Each is compared, in full, with the kept signatures of the
// representatives of as many transfers, written and compared as it goes (sim::has_signature);
// only one like none of them has its signature kept, so a plan of alike components holds one
// signature however many there are.
std::vector<Alike> distinct_components(const Plan& plan, const std::vector<std::vector<std::int32_t>>& parts,
                                       const ReshardProblem& problem, const PlacedCluster& cluster) {
  sim::SignatureContext context(problem, cluster);
  std::vector<std::vector<std::int64_t>> kept;                        // per entry of out
  std::unordered_map<std::size_t, std::vector<std::size_t>> by_size;  // transfers -> into out
  std::vector<Alike> out;
  for (std::size_t c = 0; c < parts.size(); ++c) {
    auto& alike = by_size[parts[c].size()];
    const auto same = std::ranges::find_if(
        alike, [&](std::size_t d) { return sim::has_signature(plan, parts[c], context, kept[d]); });
    if (same != alike.end()) {
      out[*same].push_back(c);
      continue;
    }
    alike.push_back(out.size());
    out.push_back({c});
    kept.push_back(sim::component_signature(plan, parts[c], context));
  }
  return out;
}

// A schedule of one call that moves every transfer of a plan of `transfers` in order and costs
// nothing of its own (refit's executors run a plan so): it ends with the last transfer, so each
// component may run under the same call over its own transfers.
bool whole_plan_call(const CallSchedule& s, std::size_t transfers) {
  if (s.calls.size() != 1) return false;
  const Call& c = s.calls.front();
  if (c.launch.value != 0 || c.finish.value != 0 || !c.copies_before.empty() || !c.copies_after.empty() ||
      !c.quantizes.empty() || !c.after.empty() || c.collective || c.transfers.size() != transfers)
    return false;
  for (std::size_t i = 0; i < transfers; ++i)
    if (c.transfers[i] != static_cast<std::int32_t>(i)) return false;
  return true;
}

// The tasks, and the events, of such a call of its own: its start and its end (call_tasks.cc). Each
// component simulated alone has them; the whole plan has them once.
constexpr std::int64_t kWholePlanCallTasks = 2;

// `whole`'s call over a component's `n` transfers.
CallSchedule component_calls(const CallSchedule& whole, std::size_t n) {
  CallSchedule out = whole;
  out.calls.front().transfers.resize(n);
  for (std::size_t i = 0; i < n; ++i) out.calls.front().transfers[i] = static_cast<std::int32_t>(i);
  return out;
}

}  // namespace

Result<ComponentSimulation> simulate_plan_by_components(const Plan& plan, const ReshardProblem& problem,
                                                        const PlacedCluster& cluster,
                                                        const PlanSimulationOptions& options,
                                                        DistinctComponents if_distinct) {
  if ((options.calls && !whole_plan_call(*options.calls, plan.transfers.size())) || options.trace)
    return unsupported(
        "simulating by components takes no trace and no call schedule but one call of the whole plan that "
        "costs nothing of its own (other calls couple the ranks)");
  const auto parts = sim::plan_components(plan, cluster);
  if (parts.size() <= 1)  // the plan is its one component: no signature, no copy of it
    return ComponentSimulation{.plan = REFIT_TRY(simulate_plan(plan, problem, cluster, options)),
                               .components = static_cast<std::int64_t>(parts.size()),
                               .simulated = static_cast<std::int64_t>(parts.size())};
  const auto distinct = distinct_components(plan, parts, problem, cluster);
  if (distinct.size() > 1 && if_distinct == DistinctComponents::kRefuse)
    return unsupported(
        fmt::format("the plan's {} components are {} distinct ones", parts.size(), distinct.size()));
  PlanSimulationOptions alone = options;
  alone.progress = nullptr;
  ComponentSimulation out{.components = static_cast<std::int64_t>(parts.size()),
                          .simulated = static_cast<std::int64_t>(distinct.size())};
  sim::ComponentResources resources(plan, cluster);
  std::int64_t tasks = 0;
  std::uint64_t events = 0;
  bool first = true;
  for (const auto& alike : distinct) {
    const auto& ids = parts[alike.front()];
    std::optional<CallSchedule> calls;
    if (options.calls) alone.calls = &calls.emplace(component_calls(*options.calls, ids.size()));
    auto sim = REFIT_TRY(simulate_plan(sim::component_plan(plan, ids), problem, cluster, alone));
    const auto count = static_cast<std::int64_t>(alike.size());
    tasks += sim.tasks * count;
    events += sim.events * static_cast<std::uint64_t>(count);
    resources.add(parts, alike, sim.resources);
    if (!first && sim.predicted <= out.plan.predicted) continue;
    first = false;
    for (auto& step : sim.critical_path)
      if (step.transfer >= 0) step.transfer = ids[at(step.transfer)];
    out.plan = std::move(sim);
  }
  if (options.calls) {  // every component counted the call's own tasks; the whole plan has them once
    tasks -= kWholePlanCallTasks * (out.components - 1);
    events -= static_cast<std::uint64_t>(kWholePlanCallTasks * (out.components - 1));
  }
  out.plan.tasks = tasks;
  out.plan.events = events;
  out.plan.resources = resources.reports(out.plan.predicted);
  return out;
}

}  // namespace refit
