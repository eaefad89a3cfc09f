// How planning and simulating the refit strategy grow with the cluster (issue 31, item 2):
// DeepSeek-V3 Megatron PP16xEP16 with data parallel 16*k (256k GPUs) -> vLLM 8k engines of TP32
// (256k GPUs), and Kimi-K2 PP16xEP16xDP16k -> 16k engines of TP16, on dgx-h100; k from 1 up,
// plus DeepSeek-V3 PP4xEP16 -> 2 x TP32 (64 GPUs a side). One iteration each (the large points
// take minutes); plan_s and simulate_s split the CPU time, peak_MB is the process's peak
// resident memory from planning to the end of the simulation (peak_memory.h). bench/RESULTS.md
// fits time ~ transfers^b over these points.
#include <ctime>
#include <string>

#include <benchmark/benchmark.h>

#include "model_problems.h"
#include "peak_memory.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/plan_simulation.h"

namespace {

// CPU seconds of this process since `start` (std::clock): the figure the shared machine's load
// moves least.
double cpu_seconds_since(std::clock_t start) {
  return static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
}

// GPUs per side: 64, or 256k for the layouts made k times data parallel.
void grow(benchmark::State& state, const char* model, int tp, int engines_per_256) {
  const auto gpus = state.range(0);
  const auto k = gpus / 256;
  const std::string train = gpus == 64 ? "pp=4,ep=16" : "pp=16,ep=16,dp=" + std::to_string(16 * k);
  const auto engines = gpus == 64 ? gpus / tp : engines_per_256 * k;
  const std::string infer = "tp=" + std::to_string(tp) + ",engines=" + std::to_string(engines);
  const auto mp = refit::testing::model_problem(model, train, infer, "dgx-h100");
  refit::bench::reset_peak_memory();
  double plan_s = 0, simulate_s = 0, predicted = 0, transfers = 0, tasks = 0;
  for (auto _ : state) {
    auto start = std::clock();
    const auto plan = refit::make_plan("refit", mp.problem, mp.cluster).value();
    plan_s = cpu_seconds_since(start);
    start = std::clock();
    const auto sim = refit::simulate_plan(plan, mp.problem, mp.cluster).value();
    simulate_s = cpu_seconds_since(start);
    predicted = sim.predicted.value;
    transfers = static_cast<double>(plan.transfers.size());
    tasks = static_cast<double>(sim.tasks);
  }
  state.counters["plan_s"] = plan_s;
  state.counters["simulate_s"] = simulate_s;
  state.counters["transfers"] = transfers;
  state.counters["tasks"] = tasks;
  state.counters["predicted_s"] = predicted;
  state.counters["peak_MB"] = static_cast<double>(refit::bench::peak_memory_bytes()) / 1e6;
}

// Each point once: the largest take minutes and gigabytes (pick them with --benchmark_filter).
#define REFIT_GROWTH_BENCH(name, ...)        \
  BENCHMARK_CAPTURE(grow, name, __VA_ARGS__) \
      ->RangeMultiplier(2)                   \
      ->Arg(64)                              \
      ->Range(256, 16384)                    \
      ->Unit(benchmark::kSecond)             \
      ->Iterations(1)                        \
      ->MeasureProcessCPUTime()

REFIT_GROWTH_BENCH(deepseek_v3_tp32, "deepseek-v3", 32, 8);
REFIT_GROWTH_BENCH(kimi_k2_tp16, "kimi-k2", 16, 16);

}  // namespace
