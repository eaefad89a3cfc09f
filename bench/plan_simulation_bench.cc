// Simulating the `refit` strategy's plan of the reference problems on one core
// (docs/guide/predicting.md, "Predictions for the reference problems"):
// DeepSeek-V3 PP16xEP16 (256 GPUs) -> 8 engines of TP32 (256 GPUs), on dgx-h100 and on
// gb200-nvl72:gpus_per_domain=64, and Kimi-K2 PP16xEP16 -> 8 engines of TP16 on dgx-h100, with the
// options `refit simulate` uses. The plan is made once,
// outside the timed loop: the loop is simulate_plan alone (plan -> model, the event loop, the
// critical path and the report).
#include <benchmark/benchmark.h>

#include "model_problems.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"

namespace {

void simulate_benchmark(benchmark::State& state, const char* model, const char* train, const char* infer,
                        const char* cluster) {
  const auto mp = refit::testing::model_problem(model, train, infer, cluster);
  const auto plan = refit::make_plan("refit", mp.problem, mp.cluster).value();
  refit::PlanSimulationOptions options;
  double events = 0, predicted = 0, tasks = 0;
  for (auto _ : state) {
    const auto sim = refit::simulate_plan(plan, mp.problem, mp.cluster, options).value();
    events += static_cast<double>(sim.events);
    predicted = sim.predicted.value;
    tasks = static_cast<double>(sim.tasks);
  }
  state.counters["tasks"] = tasks;
  state.counters["events/s"] = benchmark::Counter(events, benchmark::Counter::kIsRate);
  state.counters["predicted_s"] = predicted;
}

#define REFIT_SIMULATE_BENCH(name, ...)                    \
  BENCHMARK_CAPTURE(simulate_benchmark, name, __VA_ARGS__) \
      ->Unit(benchmark::kMillisecond)                      \
      ->Iterations(1)                                      \
      ->Repetitions(3)                                     \
      ->ReportAggregatesOnly(true)                         \
      ->MeasureProcessCPUTime()

REFIT_SIMULATE_BENCH(deepseek_v3_dgx_h100, "deepseek-v3", "pp=16,ep=16", "tp=32,engines=8", "dgx-h100");
REFIT_SIMULATE_BENCH(deepseek_v3_gb200_nvl72_64, "deepseek-v3", "pp=16,ep=16", "tp=32,engines=8",
                     "gb200-nvl72:gpus_per_domain=64");
REFIT_SIMULATE_BENCH(kimi_k2_dgx_h100, "kimi-k2", "pp=16,ep=16", "tp=16,engines=8", "dgx-h100");

}  // namespace
