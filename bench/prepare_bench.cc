// prepare() of the UCX executor for a rank that holds many parameters: N small tensors (fp32
// [32], 128 bytes each) from one training rank to one inference rank, the two ranks threads of
// this process, each rank's shards from the executor's allocate_host. The shards of a rank are one
// pooled allocation (allocate_pooled), registered and published once; before, each was a UCX
// shared-memory segment of its own, and 10k parameters took 3.8 s to prepare (40k failed).
// Timed: allocating the shards and prepare, on the slower rank. Goal: 100k parameters in < 5 s.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <chrono>
#include <string>

#include "refit/executors/host_shards.h"
#include "refit/executors/ucx_executor.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"
#include "thread_bootstrap.h"

namespace refit {
namespace {

ReshardProblem many_parameters(std::int64_t n) {
  std::vector<TensorReshard> tensors;
  for (std::int64_t i = 0; i < n; ++i)
    tensors.push_back(testing::make_reshard(
        "p" + std::to_string(i), {32}, testing::make_layout({32}, {1}, testing::rank_range(0, 1), "R"),
        testing::make_layout({32}, {1}, testing::rank_range(1, 1), "R"), DType::kFP32));
  return ReshardProblem::make(std::move(tensors), 1, 1).value();
}

void BM_PrepareManyParameters(benchmark::State& state) {
  const auto problem = many_parameters(state.range(0));
  const auto cluster = testing::make_test_cluster(1, 2, 1, 1);
  const auto plan = make_plan("refit", problem, cluster).value();
  for (auto _ : state) {
    std::vector<double> seconds(2);
    testing::run_ranks(2, [&](std::int32_t r, Bootstrap& bootstrap) {
      auto executor = make_ucx_executor(bootstrap, ExecutorOptions{}).value();
      const auto start = std::chrono::steady_clock::now();
      auto shards =
          HostShards::allocate(problem, Rank{r}, [&](Bytes b) { return executor->allocate_host(b); });
      auto prepared = executor->prepare(plan, Rank{r}, shards->buffers());
      seconds[static_cast<std::size_t>(r)] =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      if (!prepared) state.SkipWithError(prepared.error().message.c_str());
    });
    state.SetIterationTime(std::ranges::max(seconds));
  }
  state.counters["parameters"] = static_cast<double>(state.range(0));
}
BENCHMARK(BM_PrepareManyParameters)
    ->Arg(1000)
    ->Arg(10000)
    ->Arg(100000)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

}  // namespace
}  // namespace refit
