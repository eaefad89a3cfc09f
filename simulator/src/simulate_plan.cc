#include <algorithm>
#include <map>

#include <fmt/format.h>

#include "refit/core/index.h"
#include "refit/core/try.h"

#include "plan_model.h"
#include "quantize_work.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/simulator/simulate.h"
#include "refit/simulator/trace_writer.h"
#include "step_tasks.h"

namespace refit {
namespace {

using sim::TaskKind;

// Whether some task of `model` quantizes: only then does a prediction rest on a quantize rate (a
// deployment may move an FP8 problem's bf16 without quantizing, as a benchmark does).
bool charges_quantization(const sim::Model& model) {
  for (std::int32_t t = 0; t < model.task_count(); ++t)
    if (model.category(sim::TaskId{t}) == static_cast<std::uint32_t>(sim::TaskKind::kQuantize)) return true;
  return false;
}

// One critical-path step split into what it waited for before its bytes flowed (its latency:
// a call's fixed cost, a pack or unpack, or per-message latency) and its flow time.
struct StepShare {
  Seconds fixed, pack, quantize, latency, flow;
};

StepShare share_of(const sim::PlanModel& pm, const sim::SimulationResult& r, const sim::CriticalStep& step) {
  const auto t = at(step.task.value);
  const auto& timing = r.tasks[t];
  const Seconds waited{
      std::max(0.0, std::min(timing.end, timing.start).value - std::max(step.from, timing.ready).value)};
  StepShare s{.flow = timing.end - step.from - waited};
  const auto kind = static_cast<TaskKind>(pm.model.category(step.task));
  if (kind == TaskKind::kFixed) {
    s.fixed = waited;
  } else if (kind == TaskKind::kQuantize) {
    s.quantize = waited;
  } else {
    s.pack = Seconds{std::min(pm.copy_latency[t].value, waited.value)};
    s.latency = waited - s.pack;
  }
  return s;
}

void fill_breakdown(PlanSimulation& out, const sim::PlanModel& pm, const sim::SimulationResult& r) {
  auto& b = out.breakdown;
  for (const auto& step : r.critical_path) {
    const StepShare s = share_of(pm, r, step);
    b[TimeKind::kFixed] += s.fixed;
    b[TimeKind::kPackUnpack] += s.pack;
    b[TimeKind::kQuantize] += s.quantize;
    b[TimeKind::kLatency] += s.latency;
    b[sim::time_of(pm.model.category(step.task))] += s.flow;
  }
}

std::string group_of(const CallSchedule* calls, std::int32_t call) {
  if (!calls || call < 0) return "the plan";
  const auto& c = calls->calls[at(call)];
  return fmt::format("{} calls", c.group.empty() ? c.label : c.group);
}

void fill_contributors(PlanSimulation& out, const sim::PlanModel& pm, const sim::SimulationResult& r,
                       const CallSchedule* calls) {
  std::map<std::string, Contributor> by_what;
  const auto add = [&](std::string what, Seconds time) {
    if (time.value <= 0) return;
    auto& c = by_what[what];
    c.what = std::move(what);
    c.time += time;
    ++c.steps;
  };
  for (const auto& step : r.critical_path) {
    const StepShare s = share_of(pm, r, step);
    const auto group = group_of(calls, pm.call_of_task[at(step.task.value)]);
    add(fmt::format("fixed cost of {}", group), s.fixed);
    add(fmt::format("device copies of {}", group), s.pack);
    add(fmt::format("FP8 quantization in {}", group), s.quantize);
    add(fmt::format("message latency of {}", group), s.latency);
    add(fmt::format("{} time of {}", sim::phrase_of(pm.model.category(step.task)), group), s.flow);
  }
  for (auto& [what, c] : by_what) out.contributors.push_back(std::move(c));
  std::ranges::sort(out.contributors, std::greater{}, [](const Contributor& c) { return c.time; });
}

// Per call whose end is on the critical path: its last arrival minus the mean over receiving
// ranks of each one's last arrival.
Seconds waiting_on_slowest(const Plan& plan, const sim::PlanModel& pm, const sim::SimulationResult& r) {
  std::vector<char> critical_call;
  for (const auto& step : r.critical_path) {
    const auto call = pm.call_of_task[at(step.task.value)];
    if (call < 0) continue;
    if (at(call) >= critical_call.size()) critical_call.resize(at(call) + 1, 0);
    critical_call[at(call)] = 1;
  }
  std::map<std::pair<std::int32_t, std::int32_t>, double> last;  // (call, receiver) -> last arrival
  for (std::size_t t = 0; t < pm.transfer_of_task.size(); ++t) {
    const auto transfer = pm.transfer_of_task[t];
    const auto call = pm.call_of_task[t];
    if (transfer < 0 || call < 0 || at(call) >= critical_call.size() || !critical_call[at(call)]) continue;
    auto& l = last[{call, plan.transfers[at(transfer)].receiver.value}];
    l = std::max(l, r.tasks[t].end.value);
  }
  Seconds waiting;
  for (auto it = last.begin(); it != last.end();) {
    const auto call = it->first.first;
    double sum = 0, slowest = 0;
    std::int64_t n = 0;
    for (; it != last.end() && it->first.first == call; ++it, ++n) {
      sum += it->second;
      slowest = std::max(slowest, it->second);
    }
    waiting += Seconds{std::max(0.0, slowest - sum / static_cast<double>(n))};  // rounding: never below 0
  }
  return waiting;
}

void fill_resources(PlanSimulation& out, const sim::Model& m, const sim::SimulationResult& r) {
  for (std::int32_t i = 0; i < m.resource_count(); ++i) {
    const auto& u = r.resources[at(i)];
    if (u.bytes.value > 0)
      out.resources.push_back(ResourceReport{m.resource_name(sim::ResourceId{i}), u.bytes, u.utilisation});
  }
}

void fill_critical_path(PlanSimulation& out, const sim::PlanModel& pm, const sim::SimulationResult& r) {
  for (const auto& step : r.critical_path) {
    const auto t = at(step.task.value);
    out.critical_path.push_back(
        CriticalTransfer{.transfer = pm.transfer_of_task[t],
                         .call = pm.call_of_task[t],
                         .what = std::string(time_kind_name(sim::time_of(pm.model.category(step.task)))),
                         .start = step.from,
                         .end = r.tasks[t].end});
  }
}

}  // namespace

std::string_view time_kind_name(TimeKind kind) {
  constexpr std::array<std::string_view, kTimeKinds> kNames = {"latency",     "network",  "nvlink", "copy",
                                                               "pack_unpack", "quantize", "fixed"};
  return kNames[static_cast<std::size_t>(kind)];
}

Seconds TimeBreakdown::total() const {
  Seconds sum;
  for (const Seconds s : by_kind_) sum += s;
  return sum;
}

const ExecutionModel& execution_of(const Plan& plan, const PlanSimulationOptions& options) {
  if (options.calls && options.calls->execution) return *options.calls->execution;
  return execution_model(plan.execution);
}

Result<PlanSimulation> simulate_plan(const Plan& plan, const ReshardProblem& problem,
                                     const PlacedCluster& cluster, const PlanSimulationOptions& options) {
  if (cluster.ranks().rank_count() < plan.world_size())
    return mismatch(fmt::format("the plan has {} ranks, cluster '{}' places {}", plan.world_size(),
                                cluster.name(), cluster.ranks().rank_count()));
  const ExecutionModel& execution = execution_of(plan, options);
  const sim::PlanModelOptions mo{.window = options.window.value_or(execution.pair_window),
                                 .calls = options.calls,
                                 .staging = options.staging};
  const auto pm = REFIT_TRY(sim::build_plan_model(plan, problem, cluster, execution, mo));
  const sim::SimulateOptions so{
      .progress = options.progress, .rate_tolerance = options.rate_tolerance, .instant = options.instant};
  const auto r = REFIT_TRY(sim::simulate(pm.model, so));
  PlanSimulation out{.predicted = r.makespan, .tasks = pm.model.task_count(), .events = r.events};
  fill_breakdown(out, pm, r);
  out.waiting = waiting_on_slowest(plan, pm, r);
  fill_contributors(out, pm, r, options.calls);
  fill_resources(out, pm.model, r);
  fill_critical_path(out, pm, r);
  out.assumptions = cluster.cluster().spec().assumptions;
  if (sim::quantize_rate_assumed(cluster.cluster(), problem) && charges_quantization(pm.model))
    out.assumptions.push_back(sim::quantize_rate_assumption());
  if (execution.step_chunks > 0 && sim::nccl_costs_assumed(cluster, plan.world_size()))
    out.assumptions.push_back(sim::nccl_costs_assumption());
  if (options.trace) REFIT_TRY(sim::write_chrome_trace(pm.model, r, *options.trace));
  return out;
}

}  // namespace refit
