// Planning time of the `refit` strategy on the reference problems, one core
// (docs/guide/predicting.md, "Predictions for the reference problems"):
// DeepSeek-V3 PP16xEP16 (256 GPUs) -> 8 engines of TP32 (256 GPUs) on dgx-h100 and on
// gb200-nvl72:gpus_per_domain=64, and Kimi-K2 PP16xEP16 (256 GPUs) -> 8 engines of TP16 (128 GPUs)
// on dgx-h100. The problem and cluster are built once, outside the timed loop: the loop is
// make_plan alone (overlaps, balancing, forwarding, relays through neighbours' NICs, plan layout);
// the *_for_delta variants plan without those relays (PlanOptions::neighbour_relays), as for a
// delta refit, so that one run shows what the relays' pass costs.
#include <benchmark/benchmark.h>

#include "model_problems.h"
#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"

namespace {

void plan_benchmark(benchmark::State& state, bool neighbour_relays, const char* model, const char* train,
                    const char* infer, const char* cluster) {
  const auto mp = refit::testing::model_problem(model, train, infer, cluster);
  const refit::PlanOptions options{.neighbour_relays = neighbour_relays};
  std::int64_t transfers = 0, segments = 0;
  for (auto _ : state) {
    auto plan = refit::make_plan("refit", mp.problem, mp.cluster, options);
    transfers = static_cast<std::int64_t>(plan->transfers.size());
    segments = refit::compute_stats(*plan, mp.cluster).segments;
    benchmark::DoNotOptimize(plan);
  }
  state.counters["transfers"] = static_cast<double>(transfers);
  state.counters["segments"] = static_cast<double>(segments);
}

#define REFIT_PLAN_BENCH(name, ...)                    \
  BENCHMARK_CAPTURE(plan_benchmark, name, __VA_ARGS__) \
      ->Unit(benchmark::kMillisecond)                  \
      ->Iterations(3)                                  \
      ->Repetitions(3)                                 \
      ->ReportAggregatesOnly(true)

REFIT_PLAN_BENCH(deepseek_v3_pp16ep16_to_tp32dp8, true, "deepseek-v3", "pp=16,ep=16", "tp=32,engines=8",
                 "dgx-h100");
REFIT_PLAN_BENCH(deepseek_v3_pp16ep16_to_tp32dp8_for_delta, false, "deepseek-v3", "pp=16,ep=16",
                 "tp=32,engines=8", "dgx-h100");
REFIT_PLAN_BENCH(deepseek_v3_pp16ep16_to_tp32dp8_gb200_64, true, "deepseek-v3", "pp=16,ep=16",
                 "tp=32,engines=8", "gb200-nvl72:gpus_per_domain=64");
REFIT_PLAN_BENCH(kimi_k2_pp16ep16_to_tp16dp8, true, "kimi-k2", "pp=16,ep=16", "tp=16,engines=8", "dgx-h100");
REFIT_PLAN_BENCH(kimi_k2_pp16ep16_to_tp16dp8_for_delta, false, "kimi-k2", "pp=16,ep=16", "tp=16,engines=8",
                 "dgx-h100");

}  // namespace
