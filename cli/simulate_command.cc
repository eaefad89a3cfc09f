// refit simulate: predict the refit time of one strategy, or compare them all, on a cluster
// nobody has to own.
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
#include "refit/planner/plan_stats.h"
#include "refit/simulator/plan_simulation.h"

namespace refit::cli {
namespace {

struct SimulateCommandOptions {
  PlanInputOptions inputs;
  bool compare = false;
  std::string trace;
  std::optional<std::int32_t> window;  // unset: the pair window of each strategy's execution model
  bool json = false;
};

struct Row {
  std::string strategy;
  const StrategyInfo* info = nullptr;  // null for a loaded plan of a strategy this build lacks
  std::int32_t window = 0;
  PlanStats stats;
  PlanSimulation sim;
  Seconds plan_seconds;
  Seconds simulate_seconds;
};

// Prints progress on stderr once a simulation has run for more than a second.
std::function<void(double)> progress_printer(std::string strategy) {
  const auto start = std::chrono::steady_clock::now();
  return [start, strategy](double done) {
    if (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) return;
    fmt::print(stderr, "refit simulate: {}: {:.0f}% of transfers done\n", strategy, 100 * done);
  };
}

// `traced`: this is --strategy's plan, whose trace --trace writes (with --compare the others
// would multiply the file size).
[[nodiscard]] Result<Row> simulate_one(const SimulateCommandOptions& o, const PlanInputs& in,
                                       std::string_view strategy, bool traced) {
  const auto tp = REFIT_TRY(obtain_plan(o.inputs, in, strategy));
  const auto window = o.window.value_or(execution_model(tp.plan.execution).pair_window);
  const auto info = find_strategy(tp.plan.strategy);
  Row row{.strategy = tp.plan.strategy,
          .info = info ? *info : nullptr,
          .window = window,
          .stats = compute_stats(tp.plan, in.cluster),
          .sim = {},
          .plan_seconds = tp.seconds,
          .simulate_seconds = {}};
  std::ofstream trace_file;
  PlanSimulationOptions so{.progress = progress_printer(row.strategy), .trace = nullptr, .window = window};
  if (!o.trace.empty() && traced) {
    trace_file.open(o.trace);
    if (!trace_file) return fail(ErrorCode::kRuntime, fmt::format("--trace: cannot write '{}'", o.trace));
    so.trace = &trace_file;
    fmt::print(stderr, "refit simulate: writing the {} trace to {}\n", row.strategy, o.trace);
  }
  const auto start = std::chrono::steady_clock::now();
  auto sim = REFIT_TRY(simulate_plan(tp.plan, in.problem, in.cluster, so));
  row.simulate_seconds =
      Seconds{std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count()};
  row.sim = std::move(sim);
  return row;
}

const Row* baseline(const std::vector<Row>& rows) {
  auto it = std::ranges::find_if(
      rows, [](const Row& r) { return r.info && r.info->id == StrategyId::kGatherBroadcast; });
  return it == rows.end() ? nullptr : &*it;
}

nlohmann::ordered_json row_json(const Row& r, const LowerBound& lb, const Row* base) {
  nlohmann::ordered_json j{{"strategy", r.strategy},
                           {"predicted_s", r.sim.predicted.value},
                           {"lower_bound_s", lb.time.value},
                           {"ratio_to_lower_bound", r.sim.predicted / lb.time},
                           {"network_bytes", r.stats.network_bytes.value},
                           {"nvlink_bytes", r.stats.nvlink_bytes.value},
                           {"max_nic_tx_bytes", r.stats.max_nic_tx.value},
                           {"max_nic_rx_bytes", r.stats.max_nic_rx.value},
                           {"transfers", r.stats.transfers},
                           {"window", r.window},
                           {"breakdown_s",
                            {{"latency", r.sim.latency.value},
                             {"network", r.sim.network.value},
                             {"nvlink", r.sim.nvlink.value},
                             {"copy", r.sim.copy.value},
                             {"pack_unpack", r.sim.pack.value}}},
                           {"plan_seconds", r.plan_seconds.value},
                           {"simulate_seconds", r.simulate_seconds.value},
                           {"tasks", r.sim.tasks},
                           {"events", r.sim.events}};
  if (base) j["speedup_vs_gather_broadcast"] = base->sim.predicted / r.sim.predicted;
  return j;
}

void print_table(const std::vector<Row>& rows, const LowerBound& lb) {
  const Row* base = baseline(rows);
  fmt::print("lower bound {} ({})\n", human(lb.time), lb.binding);
  fmt::print("{:<18} {:>12} {:>9} {:>14} {:>12} {:>14} {:>7}\n", "strategy", "predicted", "x bound",
             "vs gather-bc", "network", "max NIC rx", "window");
  for (const auto& r : rows)
    fmt::print("{:<18} {:>12} {:>9.3f} {:>14} {:>12} {:>14} {:>7}\n", r.strategy, human(r.sim.predicted),
               r.sim.predicted / lb.time,
               base ? fmt::format("{:.2f}x", base->sim.predicted / r.sim.predicted) : std::string("-"),
               human(r.stats.network_bytes), human(r.stats.max_nic_rx),
               r.window == 0 ? std::string("-") : std::to_string(r.window));
}

void print_detail(const Row& r, const LowerBound& lb) {
  print_table({r}, lb);
  fmt::print("\ncritical path breakdown: latency {}, network {}, NVLink {}, copy {}, pack/unpack {}\n",
             human(r.sim.latency), human(r.sim.network), human(r.sim.nvlink), human(r.sim.copy),
             human(r.sim.pack));
  auto resources = r.sim.resources;
  std::ranges::sort(resources, std::greater{}, &ResourceReport::utilisation);
  fmt::print("busiest resources:\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(5, resources.size()); ++i)
    fmt::print("  {:<24} {:>12}  {:>5.1f}% utilised\n", resources[i].name, human(resources[i].bytes),
               100 * resources[i].utilisation);
  fmt::print("critical path: {} steps; simulated {} tasks, {} events in {}\n", r.sim.critical_path.size(),
             r.sim.tasks, r.sim.events, human(r.simulate_seconds));
}

[[nodiscard]] Result<void> run(const SimulateCommandOptions& o) {
  if (o.compare && !o.inputs.plan_file.empty())
    return invalid("--compare plans every strategy itself: drop --plan");
  const auto inputs = REFIT_TRY(load_plan_inputs(o.inputs));
  const auto lb = lower_bound(inputs.problem, inputs.cluster);
  std::vector<Row> rows;
  if (!o.compare) {
    rows.push_back(REFIT_TRY(simulate_one(o, inputs, o.inputs.strategy, true)));
  } else {
    const StrategyInfo* chosen = REFIT_TRY_IN(find_strategy(o.inputs.strategy), "--strategy");
    for (const auto& s : strategies())
      rows.push_back(REFIT_TRY(simulate_one(o, inputs, s.name, &s == chosen)));
  }
  if (o.json) {
    nlohmann::ordered_json j{{"cluster", inputs.cluster.name()},
                             {"lower_bound_s", lb.time.value},
                             {"lower_bound_binding", lb.binding},
                             {"strategies", nlohmann::ordered_json::array()}};
    for (const auto& r : rows) j["strategies"].push_back(row_json(r, lb, baseline(rows)));
    fmt::print("{}\n", json_text(j));
  } else if (o.compare) {
    print_table(rows, lb);
  } else {
    print_detail(rows.front(), lb);
  }
  return {};
}

}  // namespace

Action add_simulate_command(CLI::App& app) {
  auto o = std::make_shared<SimulateCommandOptions>();
  auto* cmd = app.add_subcommand("simulate", "Predict the refit time on a cluster (flow-level simulation)");
  add_plan_input_options(*cmd, o->inputs, true);
  cmd->add_flag("--compare", o->compare, "Simulate every strategy and compare them");
  cmd->add_option(
      "--trace", o->trace,
      "Write a Chrome trace event JSON of --strategy's plan (opens in Perfetto), also with --compare");
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
