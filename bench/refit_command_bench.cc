// What `refit plan` and `refit simulate --compare` do after reading their options, through the
// facade as the command calls it, on the reference problems (docs/guide/predicting.md; one core,
// medians of 3):
// - plan: the refit strategy planned and validated (refit::plan), its statistics, the lower
//   bound and the lowering's statistics (the chunks every executor cuts the plan into);
// - compare: every strategy planned and simulated as its deployment runs it (refit::compare).
// The problem and cluster are loaded once, outside the timed loop. peak_MB is the process's peak
// resident memory during the timed part (peak_memory.h), which includes the loaded problem.
#include <benchmark/benchmark.h>

#include "peak_memory.h"
#include "refit/facade/prediction.h"
#include "refit/refit.h"

namespace {

struct Loaded {
  refit::ProblemSource source;
  refit::ReshardProblem problem;
  refit::PlacedCluster cluster;
};

Loaded load(const char* model, const char* train, const char* infer, const char* cluster) {
  refit::ProblemSource source{.model = model, .train = train, .infer = infer};
  auto problem = refit::load_problem(source).value();
  auto placed = refit::load_cluster({.preset = cluster}, refit::job_of(problem)).value().placed;
  return {.source = std::move(source), .problem = std::move(problem), .cluster = std::move(placed)};
}

void plan_command(benchmark::State& state, const char* model, const char* train, const char* infer,
                  const char* cluster) {
  const auto in = load(model, train, infer, cluster);
  std::int64_t messages = 0;
  refit::bench::reset_peak_memory();
  for (auto _ : state) {
    const auto plan = refit::plan(in.problem, in.cluster).value();
    const auto stats = refit::compute_stats(plan, in.cluster);
    const auto bound = refit::lower_bound(in.problem, in.cluster);
    messages = refit::lowering::explain_plan(plan, in.problem, std::nullopt).value().messages;
    benchmark::DoNotOptimize(stats);
    benchmark::DoNotOptimize(bound);
  }
  state.counters["messages"] = static_cast<double>(messages);
  state.counters["peak_MB"] = static_cast<double>(refit::bench::peak_memory_bytes()) / 1e6;
}

void compare_command(benchmark::State& state, const char* model, const char* train, const char* infer,
                     const char* cluster) {
  const auto in = load(model, train, infer, cluster);
  double refit_s = 0;
  refit::bench::reset_peak_memory();
  for (auto _ : state) {
    const auto p =
        refit::compare({.source = in.source, .problem = in.problem, .cluster = in.cluster}, {}).value();
    refit_s = p.rows.front().sim.predicted.value;
  }
  state.counters["refit_s"] = refit_s;
  state.counters["peak_MB"] = static_cast<double>(refit::bench::peak_memory_bytes()) / 1e6;
}

#define REFIT_COMMAND_BENCH(fn, name, ...) \
  BENCHMARK_CAPTURE(fn, name, __VA_ARGS__) \
      ->Unit(benchmark::kMillisecond)      \
      ->Iterations(1)                      \
      ->Repetitions(3)                     \
      ->ReportAggregatesOnly(true)         \
      ->MeasureProcessCPUTime()

REFIT_COMMAND_BENCH(plan_command, deepseek_v3_dgx_h100, "deepseek-v3", "pp=16,ep=16", "tp=32,engines=8",
                    "dgx-h100");
REFIT_COMMAND_BENCH(plan_command, deepseek_v3_gb200_64, "deepseek-v3", "pp=16,ep=16", "tp=32,engines=8",
                    "gb200-nvl72:gpus_per_domain=64");
REFIT_COMMAND_BENCH(plan_command, kimi_k2_dgx_h100, "kimi-k2", "pp=16,ep=16", "tp=16,engines=8", "dgx-h100");
REFIT_COMMAND_BENCH(compare_command, deepseek_v3_dgx_h100, "deepseek-v3", "pp=16,ep=16", "tp=32,engines=8",
                    "dgx-h100");
REFIT_COMMAND_BENCH(compare_command, deepseek_v3_gb200_64, "deepseek-v3", "pp=16,ep=16", "tp=32,engines=8",
                    "gb200-nvl72:gpus_per_domain=64");
REFIT_COMMAND_BENCH(compare_command, kimi_k2_dgx_h100, "kimi-k2", "pp=16,ep=16", "tp=16,engines=8",
                    "dgx-h100");

}  // namespace
