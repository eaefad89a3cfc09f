#include "refit/simulator/component_simulation.h"

#include <map>

#include "component_signature.h"
#include "plan_components.h"
#include "refit/core/try.h"

namespace refit {
namespace {

std::size_t at(std::int32_t i) { return static_cast<std::size_t>(i); }

// Components grouped by signature: one representative each, with how many it stands for.
struct Distinct {
  std::size_t component;
  std::int64_t count;
};

// Components by signature, each compared in full with the representatives' (kept: one per
// distinct component).
std::vector<Distinct> distinct_components(const Plan& plan,
                                          const std::vector<std::vector<std::int32_t>>& parts,
                                          const ReshardProblem& problem, const PlacedCluster& cluster) {
  sim::SignatureContext context(problem, cluster);
  std::map<std::vector<std::int64_t>, std::size_t> index;  // -> into out
  std::vector<Distinct> out;
  for (std::size_t c = 0; c < parts.size(); ++c) {
    auto [it, fresh] = index.try_emplace(sim::component_signature(plan, parts[c], context), out.size());
    if (fresh) out.push_back(Distinct{.component = c, .count = 0});
    ++out[it->second].count;
  }
  return out;
}

}  // namespace

Result<ComponentSimulation> simulate_plan_by_components(const Plan& plan, const ReshardProblem& problem,
                                                        const PlacedCluster& cluster,
                                                        const PlanSimulationOptions& options) {
  if (options.calls || options.trace)
    return unsupported(
        "simulating by components takes neither a call schedule (its calls couple the ranks) nor a trace");
  const auto parts = sim::plan_components(plan, cluster);
  const auto distinct = distinct_components(plan, parts, problem, cluster);
  PlanSimulationOptions alone = options;
  alone.progress = nullptr;
  ComponentSimulation out{.components = static_cast<std::int64_t>(parts.size()),
                          .simulated = static_cast<std::int64_t>(distinct.size())};
  bool first = true;
  for (const auto& [component, count] : distinct) {
    const auto& ids = parts[component];
    auto sim = REFIT_TRY(simulate_plan(sim::component_plan(plan, ids), problem, cluster, alone));
    out.tasks += sim.tasks * count;
    if (!first && sim.predicted <= out.slowest.predicted) continue;
    first = false;
    for (auto& step : sim.critical_path)
      if (step.transfer >= 0) step.transfer = ids[at(step.transfer)];
    out.slowest = std::move(sim);
  }
  return out;
}

}  // namespace refit
