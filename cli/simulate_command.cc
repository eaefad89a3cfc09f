// refit simulate: predict the refit time of one strategy as a deployment runs it, or compare
// them all, on a cluster nobody has to own.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <optional>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "human_units.h"
#include "json_text.h"
#include "parse.h"
#include "plan_inputs.h"
#include "refit/core/try.h"
#include "refit/facade/report_json.h"
#include "refit/planner/plan_stats.h"
#include "refit/simulator/deployment.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/simulator/sensitivity.h"

namespace refit::cli {
namespace {

struct SimulateCommandOptions {
  PlanInputOptions inputs;
  bool compare = false;
  std::string deployment;  // empty: the strategy's default
  bool explain = false;
  bool sensitivity = false;
  std::string trace;
  std::optional<std::int32_t> window;  // unset: the pair window of each strategy's execution model
  bool json = false;
};

struct Row {
  std::string strategy;
  const StrategyInfo* info = nullptr;  // null for a loaded plan of a strategy this build lacks
  const DeploymentInfo* deployment = nullptr;
  std::int32_t window = 0;
  PlanStats stats;
  PlanSimulation sim;
  Seconds plan_seconds;
  Seconds simulate_seconds;
  std::vector<Sensitivity> sensitivity{};  // with --sensitivity
  std::vector<std::string> notes{};        // what the deployment assumed
};

// Prints progress on stderr once a simulation has run for more than a second.
std::function<void(double)> progress_printer(std::string strategy) {
  const auto start = std::chrono::steady_clock::now();
  return [start, strategy](double done) {
    if (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) return;
    fmt::print(stderr, "refit simulate: {}: {:.0f}% of transfers done\n", strategy, 100 * done);
  };
}

// Who runs `plan`: --deployment, or its strategy's default (refit's executors for a plan of a
// strategy this build lacks).
[[nodiscard]] Result<const DeploymentInfo*> deployment_for(const SimulateCommandOptions& o,
                                                           const Plan& plan) {
  if (!o.deployment.empty()) return REFIT_TRY_IN(find_deployment(o.deployment), "--deployment");
  const auto info = find_strategy(plan.strategy);
  return &deployment_info(info ? default_deployment((*info)->id) : DeploymentId::kRefit);
}

// `traced`: this is --strategy's plan, whose trace --trace writes (with --compare the others
// would multiply the file size).
[[nodiscard]] Result<Row> simulate_one(const SimulateCommandOptions& o, const PlanInputs& in,
                                       const TimedPlan& tp, const PlanStats& stats,
                                       const DeploymentInfo& deployment, bool traced) {
  const auto window = o.window.value_or(execution_model(tp.plan.execution).pair_window);
  const auto info = find_strategy(tp.plan.strategy);
  const auto schedule = REFIT_TRY_IN(deploy(deployment, tp.plan, in.problem, in.cluster),
                                     fmt::format("--deployment {}", deployment.name));
  for (const auto& note : schedule.notes) fmt::print(stderr, "refit simulate: note: {}\n", note);
  Row row{.strategy = tp.plan.strategy,
          .info = info ? *info : nullptr,
          .deployment = &deployment,
          .window = window,
          .stats = stats,
          .sim = {},
          .plan_seconds = tp.seconds,
          .simulate_seconds = {},
          .notes = schedule.notes};
  std::ofstream trace_file;
  PlanSimulationOptions so{
      .progress = progress_printer(fmt::format("{} as {} runs it", row.strategy, deployment.name)),
      .trace = nullptr,
      .window = window,
      .calls = &schedule};
  if (!o.trace.empty() && traced) {
    trace_file.open(o.trace);
    if (!trace_file) return fail(ErrorCode::kRuntime, fmt::format("--trace: cannot write '{}'", o.trace));
    so.trace = &trace_file;
    fmt::print(stderr, "refit simulate: writing the {} trace to {}\n", row.strategy, o.trace);
  }
  const auto start = std::chrono::steady_clock::now();
  auto sim = REFIT_TRY(simulate_plan(tp.plan, in.problem, in.cluster, so));
  // A full disk shows only once the trace's last bytes are flushed.
  if (trace_file.is_open()) trace_file.close();
  if (so.trace != nullptr && !trace_file)
    return fail(ErrorCode::kRuntime, fmt::format("--trace: '{}' could not be written in full", o.trace));
  row.simulate_seconds =
      Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  row.sim = std::move(sim);
  return row;
}

// The row of `strategy` as `deployment` runs it, if there is one.
const Row* find_row(const std::vector<Row>& rows, StrategyId strategy, DeploymentId deployment) {
  auto it = std::ranges::find_if(
      rows, [&](const Row& r) { return r.info && r.info->id == strategy && r.deployment->id == deployment; });
  return it == rows.end() ? nullptr : &*it;
}

// Today's practice: gather-broadcast as NeMo RL runs it.
const Row* baseline(const std::vector<Row>& rows) {
  return find_row(rows, StrategyId::kGatherBroadcast, DeploymentId::kNemoRl);
}

const Row* refit_row(const std::vector<Row>& rows) {
  return find_row(rows, StrategyId::kRefit, DeploymentId::kRefit);
}

// Device copies on the critical path: pack, unpack, stack, concatenate, copy into parameters.
Seconds copies(const PlanSimulation& s) { return s.copy + s.pack; }

nlohmann::ordered_json contributors_json(const PlanSimulation& s) {
  auto out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < std::min<std::size_t>(5, s.contributors.size()); ++i)
    out.push_back({{"what", s.contributors[i].what},
                   {"seconds", s.contributors[i].time.value},
                   {"steps", s.contributors[i].steps}});
  return out;
}

nlohmann::ordered_json row_json(const Row& r, const LowerBound& lb, const Row* base, const Row* refit) {
  nlohmann::ordered_json j{{"strategy", r.strategy},
                           {"deployment", r.deployment->name},
                           {"predicted_s", r.sim.predicted.value},
                           {"lower_bound_s", lb.time.value},
                           {"ratio_to_lower_bound", r.sim.predicted / lb.time},
                           {"network_bytes", r.stats.network_bytes.value},
                           {"nvlink_bytes", r.stats.nvlink_bytes.value},
                           {"max_nic_tx_bytes", r.stats.max_nic_tx.value},
                           {"max_nic_rx_bytes", r.stats.max_nic_rx.value},
                           {"transfers", r.stats.transfers},
                           {"window", r.window},
                           {"breakdown_s", breakdown_json(r.sim)},
                           {"waiting_s", r.sim.waiting.value},
                           {"contributors", contributors_json(r.sim)},
                           {"plan_seconds", r.plan_seconds.value},
                           {"simulate_seconds", r.simulate_seconds.value},
                           {"tasks", r.sim.tasks},
                           {"events", r.sim.events}};
  if (base) j["speedup_vs_gather_broadcast"] = base->sim.predicted / r.sim.predicted;
  if (refit) j["time_vs_refit"] = r.sim.predicted / refit->sim.predicted;
  if (!r.notes.empty()) j["notes"] = r.notes;
  if (!r.sensitivity.empty()) {
    j["sensitivity"] = nlohmann::ordered_json::array();
    for (const auto& s : r.sensitivity)
      j["sensitivity"].push_back(
          {{"constant", s.constant}, {"minus_20pct_s", s.lower.value}, {"plus_20pct_s", s.higher.value}});
  }
  return j;
}

void print_table(const std::vector<Row>& rows, const LowerBound& lb) {
  const Row* refit = refit_row(rows);
  fmt::print("lower bound {} ({})\n", human(lb.time), lb.binding);
  fmt::print("{:<17} {:<10} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}\n", "strategy",
             "deployment", "predicted", "x bound", "fixed", "network", "NVLink", "copies", "waiting",
             "x refit");
  for (const auto& r : rows)
    fmt::print("{:<17} {:<10} {:>10} {:>8.3f} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}\n", r.strategy,
               r.deployment->name, human(r.sim.predicted), r.sim.predicted / lb.time, human(r.sim.fixed),
               human(r.sim.network), human(r.sim.nvlink), human(copies(r.sim)), human(r.sim.waiting),
               refit ? fmt::format("{:.2f}x", r.sim.predicted / refit->sim.predicted) : std::string("-"));
}

void print_contributors(const Row& r) {
  fmt::print("biggest contributors to the critical path of {} as {} runs it:\n", r.strategy,
             r.deployment->name);
  for (std::size_t i = 0; i < std::min<std::size_t>(5, r.sim.contributors.size()); ++i) {
    const auto& c = r.sim.contributors[i];
    fmt::print("  {}. {} ({:.0f}%): {}, over {} steps\n", i + 1, human(c.time),
               100 * (c.time / r.sim.predicted), c.what, c.steps);
  }
}

void print_sensitivity(const Row& r) {
  const auto change = [&](Seconds t) { return fmt::format("{:+.1f}%", 100 * (t / r.sim.predicted - 1)); };
  fmt::print("sensitivity: the prediction with each constant -20% and +20% (efficiencies capped at 1):\n");
  for (const auto& s : r.sensitivity)
    fmt::print("  {:<28} {:>10} ({:>7})  {:>10} ({:>7})\n", s.constant, human(s.lower), change(s.lower),
               human(s.higher), change(s.higher));
}

void print_detail(const Row& r, const LowerBound& lb) {
  print_table({r}, lb);
  fmt::print(
      "\ncritical path breakdown: fixed {}, latency {}, network {}, NVLink {}, copy {}, pack/unpack {}, "
      "FP8 quantisation {} (of which waiting on the slowest rank {})\n",
      human(r.sim.fixed), human(r.sim.latency), human(r.sim.network), human(r.sim.nvlink), human(r.sim.copy),
      human(r.sim.pack), human(r.sim.quantize), human(r.sim.waiting));
  auto resources = r.sim.resources;
  std::ranges::sort(resources, std::greater{}, &ResourceReport::utilisation);
  fmt::print("busiest resources:\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(5, resources.size()); ++i)
    fmt::print("  {:<24} {:>12}  {:>5.1f}% utilised\n", resources[i].name, human(resources[i].bytes),
               100 * resources[i].utilisation);
  fmt::print("critical path: {} steps; simulated {} tasks, {} events in {}\n", r.sim.critical_path.size(),
             r.sim.tasks, r.sim.events, human(r.simulate_seconds));
}

// The deployed baselines move bf16 and quantise on the inference side (NeMo RL quantises on the
// receiver), so with --quantize their rows run the problem quantised at the receiver; refit's
// executors quantise where --quantize-at says. Nothing when the two are the same problem, or when
// the weights are trained in fp8 (every row moves them as they are).
[[nodiscard]] Result<std::optional<PlanInputs>> quantised_at_receivers(const SimulateCommandOptions& o) {
  const auto& model = o.inputs.problem.model_options;
  const bool before_engines = model.quantize_at == quant_site_name(QuantSite::kSender) ||
                              model.quantize_at == quant_site_name(QuantSite::kLanding);
  if (model.quantize.empty() || !before_engines) return std::nullopt;
  auto options = o.inputs;
  options.problem.model_options.quantize_at = quant_site_name(QuantSite::kReceiver);
  return REFIT_TRY(load_plan_inputs(options));
}

const char* const kReceiverNote = "quantised at the receiver, bf16 on the network, as deployed today";
const char* const kFp8PlanNote =
    "the plan file moves fp8 quantised before the engines, which no deployed baseline does: predicted as "
    "refit's executors run it";

// Whether some weight of the plan is quantised before it reaches the inference engines.
bool quantises_before_engines(const Plan& plan) {
  return std::ranges::any_of(plan.tensors, [](const TensorSpec& t) {
    return t.quantization &&
           (t.quantization->site == QuantSite::kSender || t.quantization->site == QuantSite::kLanding);
  });
}

// A strategy's plan of one problem with its stats, made once for every row that runs it.
struct PlannedRow {
  const PlanInputs* inputs;
  TimedPlan plan;
  PlanStats stats;
  bool today;  // the problem quantised at the receivers instead of the one asked for
};

[[nodiscard]] Result<PlannedRow> plan_row(const SimulateCommandOptions& o, const PlanInputs& inputs,
                                          bool today, std::string_view strategy) {
  auto tp = REFIT_TRY(obtain_plan(o.inputs, inputs, strategy));
  auto stats = compute_stats(tp.plan, inputs.cluster);
  return PlannedRow{.inputs = &inputs, .plan = std::move(tp), .stats = std::move(stats), .today = today};
}

[[nodiscard]] Result<Row> run_row(const SimulateCommandOptions& o, const PlannedRow& p,
                                  const DeploymentInfo& deployment, bool traced) {
  auto row = REFIT_TRY(simulate_one(o, *p.inputs, p.plan, p.stats, deployment, traced));
  if (p.today) row.notes.emplace_back(kReceiverNote);
  return row;
}

// Every strategy as its default deployment runs it; beside the baselines refit's executors run
// as well (direct, m2n-ring), the same plan as refit's executors would run it: the algorithm
// without the deployed code's calls. gather-broadcast's plan is refit's own strawman of the
// algorithm, so it has no such row.
[[nodiscard]] Result<std::vector<Row>> compare_rows(const SimulateCommandOptions& o,
                                                    const PlanInputs& inputs) {
  const StrategyInfo* chosen = REFIT_TRY_IN(find_strategy(o.inputs.strategy), "--strategy");
  const auto at_receivers = REFIT_TRY(quantised_at_receivers(o));
  std::vector<Row> rows;
  for (const auto& s : strategies()) {
    const auto& deployed = deployment_info(default_deployment(s.id));
    const bool today = at_receivers && deployed.id != DeploymentId::kRefit;
    const auto planned = REFIT_TRY(plan_row(o, today ? *at_receivers : inputs, today, s.name));
    rows.push_back(REFIT_TRY(run_row(o, planned, deployed, &s == chosen)));
    if (s.id != StrategyId::kDirect && s.id != StrategyId::kM2nRing) continue;
    const auto& refit = deployment_info(DeploymentId::kRefit);
    rows.push_back(REFIT_TRY(today ? run_row(o, REFIT_TRY(plan_row(o, inputs, false, s.name)), refit, false)
                                   : run_row(o, planned, refit, false)));
  }
  return rows;
}

[[nodiscard]] Result<void> run(const SimulateCommandOptions& o) {
  if (o.compare && !o.inputs.plan_file.empty())
    return invalid("--compare plans every strategy itself: drop --plan");
  if (o.compare && !o.deployment.empty())
    return invalid("--compare runs each strategy as its default deployment does: drop --deployment");
  if (o.compare && o.sensitivity) return invalid("--sensitivity re-simulates one prediction: drop --compare");
  const auto inputs = REFIT_TRY(load_plan_inputs(o.inputs));
  const auto lb = lower_bound(inputs.problem, inputs.cluster);
  std::vector<Row> rows;
  if (!o.compare) {
    const auto tp = REFIT_TRY(obtain_plan(o.inputs, inputs, o.inputs.strategy));
    const DeploymentInfo* deployment = REFIT_TRY(deployment_for(o, tp.plan));
    // A plan file is what moves: a baseline's plan that quantises before the engines is nothing
    // the deployed code runs, so refit's executors run it.
    const bool loaded = !o.inputs.plan_file.empty();
    const bool fp8_before_engines =
        loaded && deployment->id != DeploymentId::kRefit && quantises_before_engines(tp.plan);
    if (fp8_before_engines) deployment = &deployment_info(DeploymentId::kRefit);
    const auto at_receivers = deployment->id == DeploymentId::kRefit || loaded
                                  ? std::nullopt
                                  : REFIT_TRY(quantised_at_receivers(o));
    const auto planned = at_receivers ? REFIT_TRY(plan_row(o, *at_receivers, true, o.inputs.strategy))
                                      : PlannedRow{.inputs = &inputs,
                                                   .plan = tp,
                                                   .stats = compute_stats(tp.plan, inputs.cluster),
                                                   .today = false};
    rows.push_back(REFIT_TRY(run_row(o, planned, *deployment, true)));
    if (fp8_before_engines) rows.back().notes.emplace_back(kFp8PlanNote);
    if (o.sensitivity) {
      const PlanSimulationOptions so{.window = rows.front().window};
      rows.front().sensitivity = REFIT_TRY(refit::sensitivity(planned.plan.plan, planned.inputs->problem,
                                                              planned.inputs->cluster, *deployment, so));
    }
  } else {
    rows = REFIT_TRY(compare_rows(o, inputs));
  }
  if (o.json) {
    nlohmann::ordered_json j{{"cluster", inputs.cluster.name()},
                             {"lower_bound_s", lb.time.value},
                             {"lower_bound_binding", lb.binding},
                             {"strategies", nlohmann::ordered_json::array()}};
    for (const auto& r : rows) j["strategies"].push_back(row_json(r, lb, baseline(rows), refit_row(rows)));
    fmt::print("{}\n", json_text(j));
  } else if (o.compare) {
    print_table(rows, lb);
  } else {
    print_detail(rows.front(), lb);
  }
  if (o.sensitivity && !o.json) print_sensitivity(rows.front());
  if (o.explain && !o.json) {
    const auto chosen =
        std::ranges::find(rows, o.compare ? o.inputs.strategy : rows.front().strategy, &Row::strategy);
    print_contributors(*chosen);
  }
  return {};
}

}  // namespace

Action add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateCommandOptions>();
  auto* cmd = app.add_subcommand("simulate", "Predict the refit time on a cluster (flow-level simulation)");
  add_plan_input_options(*cmd, o->inputs, true);
  cmd->add_flag(
      "--compare", o->compare,
      "Simulate every strategy as its default deployment runs it, and direct and m2n-ring also as "
      "refit's executors would run their plans; columns: the critical path's fixed per-call costs, "
      "network and NVLink time, device copies, and the part of it spent waiting on the slowest rank");
  std::string deployment_help = "Who runs the plan, and so how the refit is cut into calls:";
  for (const auto& d : deployments()) deployment_help += fmt::format(" {}: {};", d.name, d.description);
  deployment_help += " Default: refit for refit's plans, nemo-rl for the baselines' (docs/deployed_refit.md)";
  cmd->add_option("--deployment", o->deployment, deployment_help);
  cmd->add_flag("--explain", o->explain,
                "Print the five biggest contributors to the critical path, in words");
  cmd->add_flag("--sensitivity", o->sensitivity,
                "Simulate again with each constant the prediction rests on (NIC, NVLink and copy bandwidth, "
                "NIC latency, NCCL's latencies and efficiencies, launch, eager-op and Ray dispatch costs, "
                "buffer size) 20% lower and 20% higher, and print how the prediction moves");
  cmd->add_option(
         "--trace", o->trace,
         "Write a Chrome trace event JSON of --strategy's plan (opens in Perfetto), also with --compare")
      ->check(output_file());
  cmd->add_option("--window", o->window,
                  "Chunks in flight per (sender, receiver) pair, sent in plan order (0: every transfer at "
                  "once). Default: the pair window of the plan's execution model: 16, the UCX executor's "
                  "grant window, for refit and direct; 0 for m2n-ring and gather-broadcast, whose NCCL "
                  "collectives give each ring step its own channel")
      ->check(non_negative());
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout");
  return [o]() { return run(*o); };
}

}  // namespace refit::cli
