#include "refit/simulator/simulate.h"

#include <algorithm>

#include <fmt/format.h>

#include "critical_path.h"
#include "engine.h"
#include "refit/core/try.h"
#include "validate.h"

namespace refit::sim {
namespace {

std::vector<ResourceUsage> usage(const Model& model, const std::vector<double>& busy, Seconds makespan) {
  std::vector<ResourceUsage> out(static_cast<std::size_t>(model.resource_count()));
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    for (const ResourceId r : model.resources(TaskId{t}))
      out[static_cast<std::size_t>(r.value)].bytes += model.bytes(TaskId{t});
  for (std::size_t r = 0; r < out.size(); ++r) {
    out[r].busy = Seconds{busy[r]};
    const double possible = model.capacity(ResourceId{static_cast<std::int32_t>(r)}).value * makespan.value;
    out[r].utilisation = possible > 0.0 ? static_cast<double>(out[r].bytes.value) / possible : 0.0;
  }
  return out;
}

// Every category a task uses gets an entry, even one the critical path never crosses.
void cover_all_categories(const Model& model, Breakdown& breakdown) {
  std::size_t categories = 0;
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    categories = std::max<std::size_t>(categories, model.category(TaskId{t}) + 1u);
  if (breakdown.by_category.size() < categories) breakdown.by_category.resize(categories);
}

}  // namespace

Result<SimulationResult> simulate(const Model& model, const SimulateOptions& options) {
  if (!(options.rate_tolerance >= 0.0 && options.rate_tolerance < 1.0))
    return out_of_range(fmt::format("rate_tolerance must be in [0, 1), got {}", options.rate_tolerance));
  if (!(options.instant >= 0.0 && options.instant < 1.0))
    return out_of_range(fmt::format("instant must be in [0, 1), got {}", options.instant));
  REFIT_TRY(check_model(model));
  const Dependents dependents = build_dependents(model);
  REFIT_TRY(check_acyclic(model, dependents));
  auto run = REFIT_TRY(Engine(model, dependents, options).run());

  SimulationResult result;
  for (const TaskTiming& t : run.timings) result.makespan = std::max(result.makespan, t.end);
  result.resources = usage(model, run.busy, result.makespan);
  auto path = find_critical_path(model, run.timings, run.flow_completions);
  result.critical_path = std::move(path.steps);
  result.breakdown = std::move(path.breakdown);
  cover_all_categories(model, result.breakdown);
  result.events = run.events;
  result.tasks = std::move(run.timings);
  return result;
}

}  // namespace refit::sim
