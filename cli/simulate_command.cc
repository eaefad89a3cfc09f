// refit simulate: predict the refit time of one strategy as a deployment runs it, or compare
// them all, on a cluster nobody has to own.
#include <algorithm>
#include <chrono>
#include <fstream>
#include <limits>
#include <optional>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "human_units.h"
#include "json_text.h"
#include "parse.h"
#include "plan_inputs.h"
#include "prediction_notes.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/facade/elastic_prediction.h"
#include "refit/facade/prediction.h"
#include "refit/facade/report_json.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/plan_stats.h"
#include "refit/simulator/deployment.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/simulator/sensitivity.h"
#include "say.h"

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
  std::int64_t staging = lowering::kDefaultStaging.value;
  std::optional<double> delta;  // predict a delta refit's step at this change fraction too
  std::int32_t jobs = 0;        // --compare: strategies at once; 0: one per core
  // Elastic refit (elastic_prediction.h): one of members, join and fail.
  std::string members;               // engine indices, "0,1,3"
  std::optional<std::int32_t> join;  // the engine to fill
  std::string peers;                 // the live engines a join takes from; empty: every other
  std::string from = std::string(join_source_name(JoinSource::kBoth));
  std::optional<std::int32_t> fail;  // the engine that dies as the refit starts
  double timeout = ExecutorOptions{}.timeout.value;
  bool json = false;

  bool elastic() const { return !members.empty() || join || fail; }
};

// Prints progress on stderr once a simulation has run for more than a second.
std::function<void(std::string_view, double)> progress_printer() {
  const auto start = std::chrono::steady_clock::now();
  return [start](std::string_view row, double done) {
    if (std::chrono::steady_clock::now() - start < std::chrono::seconds(1)) return;
    say("refit simulate: {}: {:.0f}% of transfers done\n", row, 100 * done);
  };
}

Seconds time_of(const Prediction& r, TimeKind k) { return r.sim.breakdown[k]; }

void print_table(const Predictions& p) {
  const auto& lb = p.bound;
  fmt::print("lower bound {} ({})\n", human(lb.time), lb.binding);
  fmt::print("{:<17} {:<10} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}\n", "strategy",
             "deployment", "predicted", "x bound", "fixed", "network", "NVLink", "copies", "waiting",
             "x refit");
  for (const auto& r : p.rows)
    fmt::print("{:<17} {:<10} {:>10} {:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>11}\n", r.strategy,
               r.deployment->name, human(r.sim.predicted), ratio(r.sim.predicted, lb.time),
               human(time_of(r, TimeKind::kFixed)), human(time_of(r, TimeKind::kNetwork)),
               human(time_of(r, TimeKind::kNvlink)),
               human(time_of(r, TimeKind::kCopy) + time_of(r, TimeKind::kPackUnpack)), human(r.sim.waiting),
               r.time_vs_refit ? fmt::format("{:.2f}x", *r.time_vs_refit) : std::string("-"));
}

// Each row with a delta prediction: dense and delta side by side.
void print_delta(const Predictions& p) {
  if (std::ranges::none_of(p.rows, [](const Prediction& r) { return r.delta.has_value(); })) return;
  fmt::print("\ndelta refit, {:g} % of the elements changed since the last refit (one CPU core per rank):\n",
             100 * std::ranges::find_if(p.rows, [](const Prediction& r) {
                     return r.delta.has_value();
                   })->delta->change_fraction);
  fmt::print("{:<17} {:<10} {:>10} {:>10} {:>12} {:>12} {:>6} {:>10} {:>10} {:>10} {:>9}\n", "strategy",
             "deployment", "dense", "delta", "dense bytes", "delta bytes", "rounds", "encode", "transfer",
             "decode", "x dense");
  for (const auto& r : p.rows)
    if (r.delta)
      fmt::print("{:<17} {:<10} {:>10} {:>10} {:>12} {:>12} {:>6} {:>10} {:>10} {:>10} {:>9}\n", r.strategy,
                 r.deployment->name, human(r.sim.predicted), human(r.delta->predicted),
                 human(r.delta->dense_bytes), human(r.delta->moved_bytes), r.delta->rounds.size(),
                 human(r.delta->encode), human(r.delta->transfer), human(r.delta->decode),
                 ratio(r.delta->predicted, r.sim.predicted, "x"));
}

void print_contributors(const Prediction& r) {
  fmt::print("biggest contributors to the critical path of {} as {} runs it:\n", r.strategy,
             r.deployment->name);
  for (std::size_t i = 0; i < std::min<std::size_t>(5, r.sim.contributors.size()); ++i) {
    const auto& c = r.sim.contributors[i];
    fmt::print("  {}. {} ({:.0f}%): {}, over {} steps\n", i + 1, human(c.time),
               100 * (c.time / r.sim.predicted), c.what, c.steps);
  }
}

void print_sensitivity(const Prediction& r) {
  const auto change = [&](Seconds t) { return fmt::format("{:+.1f}%", 100 * (t / r.sim.predicted - 1)); };
  fmt::print("sensitivity: the prediction with each constant -20% and +20% (efficiencies capped at 1):\n");
  for (const auto& s : r.sensitivity)
    fmt::print("  {:<28} {:>10} ({:>7})  {:>10} ({:>7})\n", s.constant, human(s.lower), change(s.lower),
               human(s.higher), change(s.higher));
}

void print_detail(const Predictions& p) {
  const auto& r = p.rows.front();
  print_table(p);
  fmt::print(
      "\ncritical path breakdown: fixed {}, latency {}, network {}, NVLink {}, copy {}, pack/unpack {}, "
      "FP8 quantization {} (of which waiting on the slowest rank {})\n",
      human(time_of(r, TimeKind::kFixed)), human(time_of(r, TimeKind::kLatency)),
      human(time_of(r, TimeKind::kNetwork)), human(time_of(r, TimeKind::kNvlink)),
      human(time_of(r, TimeKind::kCopy)), human(time_of(r, TimeKind::kPackUnpack)),
      human(time_of(r, TimeKind::kQuantize)), human(r.sim.waiting));
  const auto resources = busiest_first(r.sim);
  fmt::print("busiest resources:\n");
  for (std::size_t i = 0; i < std::min<std::size_t>(5, resources.size()); ++i)
    fmt::print("  {:<24} {:>12}  {:>5.1f}% utilised\n", resources[i].name, human(resources[i].bytes),
               100 * resources[i].utilisation);
  fmt::print("critical path: {} steps; simulated {} tasks, {} events in {}\n", r.sim.critical_path.size(),
             r.sim.tasks, r.sim.events, human(r.simulate_seconds));
}

// What --delta, --sensitivity and --explain add below the predictions (an elastic one takes the last
// two).
void print_extras(const SimulateCommandOptions& o, const Predictions& p) {
  print_delta(p);
  if (o.sensitivity) print_sensitivity(p.rows.front());
  if (o.explain) {
    const auto chosen = std::ranges::find(p.rows, o.compare ? o.inputs.strategy : p.rows.front().strategy,
                                          &Prediction::strategy);
    print_contributors(*chosen);
  }
}

void print(const SimulateCommandOptions& o, const Predictions& p) {
  if (o.json) {
    fmt::print("{}\n", json_text(predictions_json(p)));
    return;
  }
  o.compare ? print_table(p) : print_detail(p);
  print_extras(o, p);
}

void print_elastic(const SimulateCommandOptions& o, const ElasticPrediction& p) {
  print_detail(p.predictions);
  print_extras(o, p.predictions);
  if (const auto& m = p.membership)
    fmt::print(
        "\nrefit of engines {} of {}: plan derived from the full plan in {} (full plan {}); {} "
        "transfers ({}) sent again that came through other engines\n",
        fmt::join(m->membership.members, ","), p.engines, human(m->delta_seconds),
        human(m->full_plan_seconds), m->resent_transfers, human(m->resent_bytes));
  if (const auto& j = p.join)
    fmt::print(
        "\nengine {} of {} filled in {} from {}{}: {} of {} tensors from peers, {} from peers, "
        "{} from training ranks\n",
        j->join.joining, p.engines, human(p.predictions.rows.front().sim.predicted),
        join_source_name(j->join.source),
        j->join.peers.empty() ? "" : fmt::format(" (peers {})", fmt::join(j->join.peers, ",")),
        j->peer_tensors, j->tensors, human(j->peer_bytes), human(j->training_bytes));
  if (const auto& f = p.failure)
    fmt::print(
        "\nengine {} dies as the refit starts: it relays {} for other engines; they complete at {} "
        "(full refit {}, timeout {}, repair step {}): {} lost\n",
        f->engine, human(f->relayed), human(f->completion), human(f->full), human(f->timeout),
        human(f->repair), human(f->lost));
}

[[nodiscard]] Result<ElasticOptions> elastic_options(const SimulateCommandOptions& o) {
  return ElasticOptions{.members = REFIT_TRY(parse_engine_list(o.members, "--members")),
                        .join = o.join,
                        .peers = REFIT_TRY(parse_engine_list(o.peers, "--peers")),
                        .from = REFIT_TRY_IN(parse_join_source(o.from), "--from"),
                        .fail = o.fail,
                        .timeout = Seconds{o.timeout}};
}

// --members, --join or --fail: the elastic refit's prediction.
[[nodiscard]] Result<void> run_elastic(const SimulateCommandOptions& o, const PredictOptions& options,
                                       const PredictionInputs& in) {
  if (o.compare || !o.inputs.plan_file.empty())
    return invalid("--members, --join and --fail plan from the problem: drop --compare and --plan");
  const auto e = REFIT_TRY(elastic_options(o));
  const auto p = REFIT_TRY(predict_elastic(in, options, e));
  NotePrinter("simulate").print(p.predictions.rows);
  if (o.json)
    fmt::print("{}\n", json_text(elastic_json(p)));
  else
    print_elastic(o, p);
  return {};
}

[[nodiscard]] Result<void> run(const SimulateCommandOptions& o) {
  if (o.compare && !o.inputs.plan_file.empty())
    return invalid("--compare plans every strategy itself: drop --plan");
  if (o.compare && !o.deployment.empty())
    return invalid("--compare runs each strategy as its default deployment does: drop --deployment");
  if (o.compare && o.sensitivity) return invalid("--sensitivity re-simulates one prediction: drop --compare");
  const auto inputs = REFIT_TRY(load_plan_inputs(o.inputs));
  std::optional<OutputFile> trace_file;
  if (!o.trace.empty()) {
    REFIT_TRY(check_not_an_input("--trace", o.trace, o.inputs));
    trace_file.emplace(REFIT_TRY_IN(OutputFile::open(o.trace), "--trace"));
    say("refit simulate: writing the {} trace to {}\n", o.inputs.strategy, o.trace);
  }
  const PredictOptions options{.strategy = o.inputs.strategy,
                               .plan = PlanOptions{.chunk = Bytes{o.inputs.chunk_bytes}},
                               .deployment = o.deployment,
                               .window = o.window,
                               .staging = Bytes{o.staging},
                               .sensitivity = o.sensitivity,
                               .delta = o.delta,
                               .trace = trace_file ? &trace_file->stream() : nullptr,
                               .progress = progress_printer(),
                               .jobs = o.jobs};
  const PredictionInputs in{.source = o.inputs.problem, .problem = inputs.problem, .cluster = inputs.cluster};
  if (o.elastic()) return run_elastic(o, options, in);
  std::optional<Plan> loaded;
  if (!o.inputs.plan_file.empty()) loaded = REFIT_TRY(obtain_plan(o.inputs, inputs, o.inputs.strategy)).plan;
  auto made = o.compare ? compare(in, options) : predict(in, options, loaded);
  // A full disk shows only once the trace's last bytes are flushed, or as the writer's failure,
  // which knows the stream, not the file. A failed prediction leaves no trace (the file's
  // destructor removes it).
  if (trace_file && (made || !trace_file->stream())) REFIT_TRY_IN(trace_file->commit(), "--trace");
  const auto predictions = REFIT_TRY(std::move(made));
  NotePrinter("simulate").print(predictions.rows);
  print(o, predictions);
  return {};
}

void add_elastic_options(CLI::App& cmd, SimulateCommandOptions& o) {
  cmd.add_option("--members", o.members,
                 "Elastic refit (docs/guide/elastic-planning.md): predict a refit of these engines only "
                 "(indices of --infer's "
                 "engines, e.g. 0,1,3), the others keeping their weights; its plan is derived from the full "
                 "plan, and the time that took is printed beside the full plan's")
      ->check(non_empty());
  auto* join = cmd.add_option("--join", o.join,
                              "Elastic refit: predict the time to fill this engine (an index of --infer's "
                              "engines) that joins or restarts, from live engines and/or the training ranks "
                              "(--from)");
  cmd.add_option("--peers", o.peers,
                 "With --join: the live engines holding the current weights (default: every other engine)")
      ->needs(join)
      ->check(non_empty());
  cmd.add_option("--from", o.from,
                 "With --join: who sends the joining engine its weights: training, peers (the training ranks "
                 "send nothing) or both (each tensor from the side that finishes it sooner; default)")
      ->needs(join);
  auto* fail = cmd.add_option("--fail", o.fail,
                              "Elastic refit: predict what this engine dying as the refit starts costs the "
                              "others: nothing unless it relays for them; then they wait --timeout and take "
                              "its part in a repair step");
  cmd.add_option("--timeout", o.timeout,
                 fmt::format("With --fail: the executors' bound on a wait, in seconds (refit run --timeout; "
                             "default {:g}, at most {:g})",
                             ExecutorOptions{}.timeout.value, kMaxTimeout.value))
      ->needs(fail)
      ->check(seconds_within(kMinTimeout, kMaxTimeout));
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
  cmd->add_option("--deployment", o->deployment, deployment_help)->check(non_empty());
  cmd->add_flag("--explain", o->explain,
                "Print the five biggest contributors to the critical path, in words");
  cmd->add_flag("--sensitivity", o->sensitivity,
                "Simulate again with each constant the prediction rests on (NIC, NVLink and copy bandwidth, "
                "NIC latency with a calibrated chunk overhead, NCCL's latencies and efficiencies, launch, "
                "eager-op and Ray dispatch costs, buffer size) 20% lower and 20% higher, and print how the "
                "prediction moves");
  cmd->add_option(
         "--trace", o->trace,
         "Write a Chrome trace event JSON of --strategy's plan (opens in Perfetto), also with --compare")
      ->check(output_file());
  cmd->add_option(
         "--window", o->window,
         fmt::format("Chunks in flight per (sender, receiver) pair, sent in plan order (0: every "
                     "transfer at once). Default: the pair window of the plan's execution model: {}, "
                     "the UCX executor's grant window, for refit and direct; 0 for m2n-ring and "
                     "gather-broadcast, whose NCCL collectives give each ring step its own channel",
                     execution_model(ExecutionModelId::kRefitUcx).pair_window))
      ->check(non_negative());
  cmd->add_option("--staging", o->staging,
                  fmt::format("Staging bytes per rank of refit's executors (refit run --staging), which sets "
                              "the chunks they cut messages into (default {} MiB); the deployed baselines' "
                              "rows keep their own buffers",
                              lowering::kDefaultStaging.value >> 20))
      ->check(bytes_at_least(lowering::kMinStaging.value));
  cmd->add_option(
         "--delta", o->delta,
         "Also predict a delta refit's step (docs/delta.md) where this fraction of the elements "
         "changed since the last refit, beside each row refit's executors run whose plan the delta "
         "executor takes (--strategy refit, whose relays forward in rounds, --strategy direct --deployment "
         "refit, or --compare's rows as refit's executors run them)")
      ->check(fraction());
  cmd->add_option("--jobs", o->jobs,
                  "With --compare: strategies planned and simulated at once, one thread each (default 0: one "
                  "per core; 1 holds the least memory)")
      ->check(non_negative());
  add_elastic_options(*cmd, *o);
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout");
  return [o]() { return run(*o); };
}

}  // namespace refit::cli
