#pragma once
// Runs a plan through the UCX executor with its ranks as threads of one process, each with its
// own executor and host shards; reports what each rank saw (prepare's refusal, the execution's
// error, data that failed verification).
#include <chrono>
#include <functional>
#include <optional>
#include <thread>

#include <gtest/gtest.h>

#include "refit/executors/host_shards.h"
#include "refit/executors/quantizing_executor.h"
#include "refit/executors/ucx_executor.h"
#include "refit/planner/strategy.h"
#include "thread_bootstrap.h"

namespace refit::testing {

struct Outcome {
  std::optional<Error> error;
  bool prepared = false;
  std::optional<Error> wrong_data;
  ExecutionReport report;
  double seconds = 0;
};

struct RunSpec {
  ExecutorOptions options;
  std::int32_t executions = 1;
  std::function<void(std::int32_t, Plan&, RankBuffers&)> tweak;  // per rank, before prepare
  std::int32_t silent_rank = -1;  // prepares, then never executes (a hung peer)
  bool executor_memory = false;   // shards from the executor's allocate_host, not the heap
};

inline HostShards shards_for(const ReshardProblem& problem, std::int32_t r, Executor& executor,
                             bool executor_memory) {
  if (!executor_memory) return HostShards::allocate(problem, Rank{r});
  auto shards = HostShards::allocate(problem, Rank{r}, [&](Bytes b) { return executor.allocate_host(b); });
  EXPECT_TRUE(shards) << shards.error().message;
  return std::move(*shards);
}

inline std::vector<Outcome> run_plan(const ReshardProblem& problem, const Plan& plan, const RunSpec& spec) {
  std::vector<Outcome> out(static_cast<std::size_t>(plan.world_size()));
  run_ranks(plan.world_size(), [&](std::int32_t r, Bootstrap& bootstrap) {
    Outcome& o = out[static_cast<std::size_t>(r)];
    auto made = make_ucx_executor(bootstrap, spec.options);
    ASSERT_TRUE(made) << made.error().message;
    // As the registry hands it out: weights quantized at the senders leave as fp8.
    std::unique_ptr<Executor> executor =
        std::make_unique<QuantizingExecutor>(std::move(*made), bootstrap, spec.options.staging);
    auto shards = shards_for(problem, r, *executor, spec.executor_memory);
    Plan mine = plan;
    if (spec.tweak) spec.tweak(r, mine, shards.buffers());
    auto prepared = executor->prepare(mine, Rank{r}, shards.buffers());
    if (!prepared) {
      o.error = prepared.error();
      return;
    }
    o.prepared = true;
    if (r == spec.silent_rank) {
      std::this_thread::sleep_for(std::chrono::duration<double>(spec.options.timeout.value * 2));
      return;
    }
    const auto start = std::chrono::steady_clock::now();
    for (std::int32_t e = 0; e < spec.executions && !o.error; ++e) {
      auto report = executor->execute(**prepared);
      if (!report)
        o.error = report.error();
      else
        o.report = *report;
    }
    o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (auto ok = shards.verify(problem); !ok) o.wrong_data = ok.error();
  });
  return out;
}

inline void expect_all_verified(const std::vector<Outcome>& outcomes) {
  for (std::size_t r = 0; r < outcomes.size(); ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    EXPECT_FALSE(outcomes[r].error) << outcomes[r].error->message;
    EXPECT_FALSE(outcomes[r].wrong_data) << outcomes[r].wrong_data->message;
  }
}

inline Plan plan_for(const ReshardProblem& problem, const PlacedCluster& cluster, std::string_view strategy,
                     Bytes chunk) {
  auto plan = make_plan(strategy, problem, cluster, PlanOptions{.chunk = chunk});
  EXPECT_TRUE(plan) << plan.error().message;
  EXPECT_TRUE(validate(*plan, problem));
  return *plan;
}

}  // namespace refit::testing
