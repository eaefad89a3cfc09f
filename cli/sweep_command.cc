// refit sweep: what-if studies for people sizing a cluster. Every combination of the --vary
// values is predicted as `refit simulate --compare` predicts one problem, --jobs points at once.
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>

#include <unistd.h>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "cluster_options.h"
#include "command.h"
#include "human_units.h"
#include "json_text.h"
#include "parse.h"
#include "prediction_notes.h"
#include "problem_options.h"
#include "refit/core/try.h"
#include "refit/facade/sweep.h"
#include "say.h"

namespace refit::cli {
namespace {

struct SweepCommandOptions {
  ProblemSource problem;
  ClusterSource cluster;
  std::int64_t chunk_bytes = PlanOptions{}.chunk.value;
  std::vector<std::string> vary;
  std::int32_t jobs = 0;
  std::optional<std::int32_t> window;
  bool json = false;
};

// "KEY=V1,V2,..."; layouts hold commas of their own, so train and infer values are split on ';'.
[[nodiscard]] Result<SweepAxis> parse_axis(std::string_view text) {
  const auto eq = text.find('=');
  if (eq == std::string_view::npos || eq == 0)
    return parse_error(fmt::format("--vary {}: expected KEY=V1,V2,... (layouts: KEY=A;B)", text));
  SweepAxis axis{.key = std::string(text.substr(0, eq)), .values = {}};
  const char separator = axis.key == kSweepTrain || axis.key == kSweepInfer ? ';' : ',';
  // Every value between separators counts: an empty one is a slip ("tp=2;;tp=4"), not a value to drop.
  for (std::string_view rest = text.substr(eq + 1);;) {
    const auto end = std::min(rest.find(separator), rest.size());
    if (end == 0)
      return parse_error(fmt::format("--vary {}: an empty value in '{}' (expected {}=V1{}V2{}...)", axis.key,
                                     text, axis.key, separator, separator));
    axis.values.emplace_back(rest.substr(0, end));
    if (end == rest.size()) break;
    rest.remove_prefix(end + 1);
  }
  return axis;
}

// A bar redrawn in place on a terminal; otherwise (logs, CI) a line every 5 s and at the end, so
// that a sweep of many quick points does not flood the log.
std::function<void(std::size_t, std::size_t)> progress_bar() {
  using Clock = std::chrono::steady_clock;
  static constexpr auto kLogEvery = std::chrono::seconds(5);
  const bool terminal = isatty(fileno(stderr)) != 0;
  const auto start = Clock::now();
  return [terminal, start, logged = start](std::size_t done, std::size_t total) mutable {
    constexpr std::size_t kWidth = 30;
    const auto now = Clock::now();
    if (!terminal && done < total && now - logged < kLogEvery) return;
    logged = now;
    const auto filled = kWidth * done / total;
    say("{}refit sweep: [{}{}] {}/{} points, {:.0f} s{}", terminal ? "\r" : "", std::string(filled, '#'),
        std::string(kWidth - filled, ' '), done, total, std::chrono::duration<double>(now - start).count(),
        terminal && done < total ? "" : "\n");
  };
}

std::string values_text(const SweepPoint& point) {
  std::string out;
  for (const auto& [key, value] : point.values)
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", key, value);
  return out;
}

void print_table(const std::vector<SweepPoint>& points, const std::vector<Predictions>& predicted) {
  fmt::print("{:<40} {:<17} {:<10} {:>10} {:>8} {:>8}\n", "point", "strategy", "deployment", "predicted",
             "x bound", "x refit");
  for (std::size_t i = 0; i < points.size(); ++i)
    for (const auto& r : predicted[i].rows)
      fmt::print("{:<40} {:<17} {:<10} {:>10} {:>8} {:>8}\n", values_text(points[i]), r.strategy,
                 r.deployment->name, human(r.sim.predicted), ratio(r.sim.predicted, predicted[i].bound.time),
                 r.time_vs_refit ? fmt::format("{:.2f}x", *r.time_vs_refit) : std::string("-"));
}

nlohmann::ordered_json sweep_json(const std::vector<SweepPoint>& points,
                                  const std::vector<Predictions>& predicted) {
  auto out = nlohmann::ordered_json::array();
  for (std::size_t i = 0; i < points.size(); ++i) {
    nlohmann::ordered_json point{{"values", nlohmann::ordered_json::object()}};
    for (const auto& [key, value] : points[i].values) point["values"][key] = value;
    point.update(predictions_json(predicted[i]));
    out.push_back(std::move(point));
  }
  return nlohmann::ordered_json{{"points", std::move(out)}};
}

[[nodiscard]] Result<void> run(const SweepCommandOptions& o) {
  std::vector<SweepAxis> axes;
  for (const auto& v : o.vary) axes.push_back(REFIT_TRY(parse_axis(v)));
  const auto points = REFIT_TRY(sweep_points(o.problem, o.cluster, axes));
  const SweepOptions options{
      .predict = {.plan = PlanOptions{.chunk = Bytes{o.chunk_bytes}}, .window = o.window},
      .jobs = o.jobs,
      .progress = progress_bar()};
  const auto results = REFIT_TRY(sweep(points, options));
  std::vector<Predictions> predicted;
  for (const auto& r : results) predicted.push_back(REFIT_TRY(r));
  NotePrinter notes("sweep");
  for (const auto& p : predicted) notes.print(p.rows);
  if (o.json)
    fmt::print("{}\n", json_text(sweep_json(points, predicted)));
  else
    print_table(points, predicted);
  return {};
}

std::string keys_help() {
  std::string out =
      "What to vary, KEY=V1,V2,... (layouts: train=A;B, infer=A;B), every combination predicted; keys:";
  for (const auto& [key, meaning] : sweep_keys()) out += fmt::format(" {} ({});", key, meaning);
  return out;
}

}  // namespace

Action add_sweep_command(CLI::App& app) {
  auto o = std::make_shared<SweepCommandOptions>();
  auto* cmd = app.add_subcommand(
      "sweep", "Predict every strategy over a grid of layouts and cluster parameters, points in parallel");
  add_problem_options(cmd, o->problem);
  add_cluster_options(*cmd, o->cluster);
  cmd->add_option("--chunk", o->chunk_bytes,
                  "Largest chunk a message is cut into, in bytes (default 8 MiB); refit's plan cuts what "
                  "relays forward finer")
      ->check(positive());
  cmd->add_option("--vary", o->vary, keys_help())->required()->take_all()->allow_extra_args(false);
  cmd->add_option("--jobs", o->jobs, "Points predicted at once, one thread each (default 0: one per core)")
      ->check(non_negative());
  cmd->add_option("--window", o->window,
                  "Chunks in flight per (sender, receiver) pair for every strategy (default: each one's own, "
                  "as refit simulate)")
      ->check(non_negative());
  cmd->add_flag("--json", o->json,
                "Print one JSON object on stdout: a \"points\" array, each point's "
                "values and its refit simulate --compare --json fields");
  return [o]() { return run(*o); };
}

}  // namespace refit::cli
