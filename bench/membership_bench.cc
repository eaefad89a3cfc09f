// A membership change's plan delta beside a full plan (the goal: the delta in <= 10 % of a full
// plan's time; bench/RESULTS.md, "elastic refit, a membership's plan delta"), on DeepSeek-V3
// PP16xEP16 (256 GPUs) -> 8 engines of TP32 (256 GPUs) on dgx-h100, one core. The problem,
// cluster and full plan are built once, outside the timed loops: `full` times make_plan; `delta`
// times what a membership change costs, the members' problem and the member plan derived from the
// full plan; `join` plans an engine filled from the other seven and the training ranks (a small
// problem of its own, planned from scratch). member_plan takes the full plan by value: `delta`
// gives it a copy made outside the timed region, and `full_plan_copy` times that copy, which a
// caller that keeps the full plan for the next change pays too.
#include <optional>

#include <benchmark/benchmark.h>

#include "model_problems.h"
#include "refit/planner/membership.h"
#include "refit/planner/strategy.h"

namespace {

refit::testing::ModelProblem deepseek() {
  return refit::testing::model_problem("deepseek-v3", "pp=16,ep=16", "tp=32,engines=8", "dgx-h100");
}

// Both the full plan and the delta are timed until their result is made; freeing it (a good
// part of a plan of millions of boxes) is outside the timed region.
void full(benchmark::State& state) {
  const auto mp = deepseek();
  for (auto _ : state) {
    auto plan = std::optional(refit::make_plan("refit", mp.problem, mp.cluster));
    benchmark::DoNotOptimize(plan);
    state.PauseTiming();
    plan.reset();
    state.ResumeTiming();
  }
}

void delta(benchmark::State& state, std::vector<std::int32_t> members) {
  const auto mp = deepseek();
  const auto plan = refit::make_plan("refit", mp.problem, mp.cluster).value();
  const refit::MemberEngines m{.engines = 8, .members = std::move(members)};
  std::int64_t transfers = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto copy = plan;
    state.ResumeTiming();
    auto problem = std::optional(refit::members_problem(mp.problem, m));
    auto derived = std::optional(refit::member_plan(std::move(copy), mp.problem, mp.cluster, m));
    benchmark::DoNotOptimize(problem);
    benchmark::DoNotOptimize(derived);
    state.PauseTiming();
    transfers = static_cast<std::int64_t>((*derived)->plan.transfers.size());
    problem.reset();
    derived.reset();
    copy = refit::Plan{};
    state.ResumeTiming();
  }
  state.counters["transfers"] = static_cast<double>(transfers);
  state.counters["full_transfers"] = static_cast<double>(plan.transfers.size());
}

// What a caller that keeps the full plan for the next change pays besides the delta.
void copy(benchmark::State& state) {
  const auto mp = deepseek();
  const auto plan = refit::make_plan("refit", mp.problem, mp.cluster).value();
  for (auto _ : state) {
    auto copied = plan;
    benchmark::DoNotOptimize(copied);
  }
}

void join(benchmark::State& state) {
  const auto mp = deepseek();
  const refit::JoinOptions o{
      .engines = 8, .joining = 7, .peers = {0, 1, 2, 3, 4, 5, 6}, .source = refit::JoinSource::kBoth};
  for (auto _ : state) {
    auto joined = refit::join_problem(mp.problem, mp.cluster, o);
    benchmark::DoNotOptimize(refit::make_plan("refit", joined->problem, joined->cluster));
  }
}

BENCHMARK(full)
    ->Name("deepseek_v3_256_to_256/full_plan")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(delta, seven_of_eight, std::vector<std::int32_t>{0, 1, 2, 3, 4, 5, 6})
    ->Name("deepseek_v3_256_to_256/delta_7_of_8")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK_CAPTURE(delta, four_of_eight, std::vector<std::int32_t>{0, 2, 4, 6})
    ->Name("deepseek_v3_256_to_256/delta_4_of_8")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK(copy)
    ->Name("deepseek_v3_256_to_256/full_plan_copy")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);
BENCHMARK(join)
    ->Name("deepseek_v3_256_to_256/join_1_from_7_and_training")
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3)
    ->Repetitions(3)
    ->ReportAggregatesOnly(true);

}  // namespace
