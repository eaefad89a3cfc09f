// How planning and simulating the refit strategy grow with the cluster:
// DeepSeek-V3 Megatron PP16xEP16 with data parallel 16*k (256k GPUs) -> vLLM 8k engines of TP32
// (256k GPUs), and Kimi-K2 PP16xEP16xDP16k -> 16k engines of TP16, on dgx-h100; k from 1 up,
// plus DeepSeek-V3 PP4xEP16 -> 2 x TP32 (64 GPUs a side). One iteration each (the large points
// take minutes); plan_s and simulate_s split the CPU time, peak_MB is the process's peak
// resident memory from planning to the end of the simulation (peak_memory.h). The `whole`
// benchmarks simulate the whole plan (simulate_plan), the `components` ones each distinct
// independent component once (simulate_plan_by_components), up to 16,384 GPUs a side.
// bench/RESULTS.md ("Growth with the cluster") fits time ~ transfers^b over these points.
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include <benchmark/benchmark.h>

#include "model_problems.h"
#include "peak_memory.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/component_simulation.h"
#include "refit/simulator/plan_simulation.h"

namespace {

// CPU seconds of this process since `start` (std::clock): the figure the shared machine's load
// moves least.
double cpu_seconds_since(std::clock_t start) {
  return static_cast<double>(std::clock() - start) / CLOCKS_PER_SEC;
}

// Distinct (sender, receiver) pairs of network transfers: what grows with both sides when every
// destination domain takes pieces from every source replica.
double network_pairs(const refit::Plan& plan) {
  std::vector<std::uint64_t> pairs;
  for (const auto& t : plan.transfers)
    if (t.link == refit::LinkKind::kNetwork)
      pairs.push_back(static_cast<std::uint64_t>(t.sender.value) << 32 |
                      static_cast<std::uint32_t>(t.receiver.value));
  std::ranges::sort(pairs);
  return static_cast<double>(std::ranges::distance(pairs.begin(), std::unique(pairs.begin(), pairs.end())));
}

enum class Simulation : bool { kWhole, kComponents };

// GPUs per side: 64, or 256k for the reference problems' layouts made k times data parallel.
void grow(benchmark::State& state, const char* model, int tp, int engines_per_256, Simulation how) {
  const auto gpus = state.range(0);
  const auto k = gpus / 256;
  const std::string train = gpus == 64 ? "pp=4,ep=16" : "pp=16,ep=16,dp=" + std::to_string(16 * k);
  const auto engines = gpus == 64 ? gpus / tp : engines_per_256 * k;
  const std::string infer = "tp=" + std::to_string(tp) + ",engines=" + std::to_string(engines);
  const auto mp = refit::testing::model_problem(model, train, infer, "dgx-h100");
  refit::bench::reset_peak_memory();
  double plan_s = 0, simulate_s = 0, predicted = 0, transfers = 0, tasks = 0, components = 0, simulated = 0;
  double pairs = 0;
  for (auto _ : state) {
    auto start = std::clock();
    const auto plan = refit::make_plan("refit", mp.problem, mp.cluster).value();
    plan_s = cpu_seconds_since(start);
    start = std::clock();
    if (how == Simulation::kWhole) {
      const auto sim = refit::simulate_plan(plan, mp.problem, mp.cluster).value();
      predicted = sim.predicted.value;
      tasks = static_cast<double>(sim.tasks);
    } else {
      const auto sim = refit::simulate_plan_by_components(plan, mp.problem, mp.cluster).value();
      predicted = sim.plan.predicted.value;
      tasks = static_cast<double>(sim.plan.tasks);
      components = static_cast<double>(sim.components);
      simulated = static_cast<double>(sim.simulated);
    }
    simulate_s = cpu_seconds_since(start);
    transfers = static_cast<double>(plan.transfers.size());
    state.PauseTiming();
    pairs = network_pairs(plan);
    state.ResumeTiming();
  }
  state.counters["plan_s"] = plan_s;
  state.counters["simulate_s"] = simulate_s;
  state.counters["transfers"] = transfers;
  state.counters["network_pairs"] = pairs;
  state.counters["tasks"] = tasks;
  state.counters["components"] = components;
  state.counters["simulated"] = simulated;
  state.counters["predicted_s"] = predicted;
  state.counters["peak_MB"] = static_cast<double>(refit::bench::peak_memory_bytes()) / 1e6;
}

// Each point once: the largest take minutes and gigabytes (pick them with --benchmark_filter;
// bench/RESULTS.md says which ran here and which would not fit this machine's memory).
#define REFIT_GROWTH_BENCH(name, ...)        \
  BENCHMARK_CAPTURE(grow, name, __VA_ARGS__) \
      ->RangeMultiplier(2)                   \
      ->Arg(64)                              \
      ->Range(256, 16384)                    \
      ->Unit(benchmark::kSecond)             \
      ->Iterations(1)                        \
      ->MeasureProcessCPUTime()

REFIT_GROWTH_BENCH(deepseek_v3_tp32, "deepseek-v3", 32, 8, Simulation::kWhole);
REFIT_GROWTH_BENCH(kimi_k2_tp16, "kimi-k2", 16, 16, Simulation::kWhole);
REFIT_GROWTH_BENCH(deepseek_v3_tp32_components, "deepseek-v3", 32, 8, Simulation::kComponents);
REFIT_GROWTH_BENCH(kimi_k2_tp16_components, "kimi-k2", 16, 16, Simulation::kComponents);

}  // namespace
