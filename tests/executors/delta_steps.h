#pragma once
// What the delta executor tests share: plans of a problem, a step that fails on purpose, the
// steps of a scenario run on every rank as threads (their reports and what each rank verified),
// the two places a step's bytes can lie (DeltaExecutorMemory), and a re-balance scenario.
#include <array>
#include <functional>
#include <initializer_list>
#include <string_view>

#include <gtest/gtest.h>

#include "delta_problem.h"
#include "device_delta_memory.h"
#include "quantized_problems.h"
#include "refit/executors/delta_executor.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/quantizing_executor.h"
#include "refit/executors/synthetic_shards.h"
#include "refit/executors/ucx_executor.h"
#include "test_cluster.h"
#include "test_problems.h"
#include "thread_bootstrap.h"
#include "ucx_harness.h"

namespace refit::delta_steps {

using testing::make_layout;
using testing::make_reshard;
using testing::rank_range;

inline Plan direct_plan(const ReshardProblem& problem) {
  return testing::plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "direct", Bytes{4096});
}

// Lands each piece once on the inference node (ranks 2-3) and relays it over NVLink to the other
// rank there: one round of two hops, the relays forwarding in hop 1 the payloads as they arrived.
inline Plan relayed_plan(const ReshardProblem& problem) {
  return testing::plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "refit", Bytes{4096});
}

// Fails a transfer (one hop of a delta step) when `fail` says so, after the executor behind has
// moved every byte: the round returns an error on this rank although the payloads landed.
class FailingStep final : public Executor {
 public:
  FailingStep(std::unique_ptr<Executor> inner, std::function<bool()> fail)
      : inner_(std::move(inner)), fail_(std::move(fail)) {}
  std::string_view name() const override { return inner_->name(); }
  ExecutorCapabilities capabilities() const override { return inner_->capabilities(); }
  Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                const RankBuffers& buffers) override {
    return inner_->prepare(plan, rank, buffers);
  }
  Result<ExecutionReport> execute(PreparedPlan& prepared) override {
    auto report = inner_->execute(prepared);
    if (fail_()) return fail(ErrorCode::kPeerFailed, "the test failed this step");
    return report;
  }

 private:
  std::unique_ptr<Executor> inner_;
  std::function<bool()> fail_;
};

struct Step {
  std::optional<Error> error;
  std::optional<Error> wrong;
  ExecutionReport report;
};

// Where the bytes lie and which codec runs (delta_memory.h).
enum class Memory {
  kCpuCodec,        // host memory, DeltaCodec with zstd (the default)
  kCpuCodecRaw,     // host memory, DeltaCodec without an entropy stage
  kGpuCodecBodies,  // DeviceDeltaMemory over HostDeltaKernels: the GPU codec's bodies on the host
};

inline std::string memory_name(Memory m) {
  constexpr std::array<const char*, 3> kNames{"CpuCodec", "CpuCodecRaw", "GpuCodecBodies"};
  return kNames[static_cast<std::size_t>(m)];
}

inline void PrintTo(Memory m, std::ostream* os) { *os << memory_name(m); }

inline DeltaExecutor delta_executor(std::unique_ptr<Executor> inner, Bootstrap& bootstrap, Memory memory,
                                    std::optional<DeltaRebalance> rebalance = std::nullopt) {
  if (memory == Memory::kGpuCodecBodies)
    return DeltaExecutor(
        std::move(inner), bootstrap,
        std::make_unique<nccl_detail::DeviceDeltaMemory>(std::make_unique<nccl_detail::HostDeltaKernels>()),
        std::move(rebalance));
  return DeltaExecutor(std::move(inner), bootstrap,
                       DeltaEncodeOptions{.entropy = memory == Memory::kCpuCodec}, std::move(rebalance));
}

struct Scenario {
  double change_fraction = 0.02;
  std::int32_t steps = 1;
  std::function<bool(std::int32_t r, std::int32_t s)> hold_weights;  // true: no update before step s
  std::function<void(std::int32_t r, std::int32_t s, RankBuffers&)> before_step;  // after the update
  std::function<bool(std::int32_t r, std::int32_t s)> fail_step;  // true: step s fails on rank r
  // The hop of the step that fails, counting every round's hops in turn; nullopt: every hop.
  std::optional<std::int32_t> fail_hop;
  double frozen = 0.0;  // the share of the tensors that never change (SyntheticShards::make)
  std::optional<DeltaRebalance> rebalance;
  // After the last step, on every rank: its bootstrap and its buffers (sources at the last step's
  // weights, destinations as the delta refit left them).
  std::function<void(std::int32_t r, Bootstrap&, const RankBuffers&)> after_steps;
  Memory memory = Memory::kCpuCodec;
};

// Every rank's step by step outcome: [rank][step].
inline std::vector<std::vector<Step>> run_steps(const ReshardProblem& problem, const Plan& plan,
                                                const Scenario& sc) {
  std::vector<std::vector<Step>> out(static_cast<std::size_t>(plan.world_size()));
  testing::run_ranks(plan.world_size(), [&](std::int32_t r, Bootstrap& bootstrap) {
    auto ucx = make_ucx_executor(bootstrap, ExecutorOptions{.timeout = Seconds{20}});
    ASSERT_TRUE(ucx) << ucx.error().message;
    bool fail_now = false;
    std::int32_t hop = 0;  // of the step running: the executor behind runs once a hop
    const auto fails = [&] {
      const auto now = hop++;
      return fail_now && (!sc.fail_hop || *sc.fail_hop == now);
    };
    auto executor = delta_executor(std::make_unique<FailingStep>(std::move(*ucx), fails), bootstrap,
                                   sc.memory, sc.rebalance);
    auto shards = HostShards::allocate(problem, Rank{r});
    auto weights =
        SyntheticShards::make(problem, shards.buffers(),
                              SyntheticUpdate{.change_fraction = sc.change_fraction, .seed = 5}, sc.frozen);
    ASSERT_TRUE(weights) << weights.error().message;
    auto prepared = executor.prepare(plan, Rank{r}, shards.buffers());
    ASSERT_TRUE(prepared) << prepared.error().message;
    for (std::int32_t s = 0; s < sc.steps; ++s) {
      if (s > 0 && !(sc.hold_weights && sc.hold_weights(r, s))) {
        ASSERT_TRUE(weights->advance());
      }
      if (sc.before_step) sc.before_step(r, s, shards.buffers());
      fail_now = sc.fail_step && sc.fail_step(r, s);
      hop = 0;
      Step step;
      auto report = executor.execute(**prepared);
      if (report)
        step.report = *report;
      else
        step.error = report.error();
      if (auto ok = weights->verify(); !ok) step.wrong = ok.error();
      out[static_cast<std::size_t>(r)].push_back(std::move(step));
    }
    if (sc.after_steps) sc.after_steps(r, bootstrap, shards.buffers());
  });
  return out;
}

// Every one of the 4 ranks refuses `plan` at prepare, with a message naming each of `named`.
inline void expect_refused_on_every_rank(const ReshardProblem& problem, const Plan& plan,
                                         std::initializer_list<std::string_view> named) {
  testing::run_ranks(4, [&](std::int32_t r, Bootstrap& bootstrap) {
    auto ucx = make_ucx_executor(bootstrap, ExecutorOptions{.timeout = Seconds{20}});
    ASSERT_TRUE(ucx);
    DeltaExecutor executor(std::move(*ucx), bootstrap);
    auto shards = HostShards::allocate(problem, Rank{r});
    const auto prepared = executor.prepare(plan, Rank{r}, shards.buffers());
    ASSERT_FALSE(prepared);
    for (const auto name : named)
      EXPECT_NE(prepared.error().message.find(name), std::string::npos) << prepared.error().message;
  });
}

// A rank's destination bytes, back to back.
// Calls `check(rank, step, its result)` for every step of every rank, after asserting that the
// step neither failed nor left the rank with bytes other than that step's weights (stopping at the
// first that did).
template <typename Check>
void for_each_exact_step(const std::vector<std::vector<Step>>& steps, Check check) {
  for (std::size_t r = 0; r < steps.size(); ++r)
    for (std::size_t s = 0; s < steps[r].size(); ++s) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
      const auto& step = steps[r][s];
      ASSERT_FALSE(step.error) << step.error->message;
      ASSERT_FALSE(step.wrong) << step.wrong->message;
      check(static_cast<std::int32_t>(r), static_cast<std::int32_t>(s), step);
    }
}

inline std::vector<std::byte> destination_bytes(const RankBuffers& b) {
  std::vector<std::byte> out;
  for (const auto& d : b.destinations) out.insert(out.end(), d.bytes.begin(), d.bytes.end());
  return out;
}

inline const DeltaStepReport& delta_of(const Step& s) {
  EXPECT_TRUE(s.report.delta.has_value());
  static const DeltaStepReport none;
  return s.report.delta ? *s.report.delta : none;
}

class DeltaExecutorMemory : public ::testing::TestWithParam<Memory> {};

inline std::function<Result<Plan>(std::vector<Bytes>)> replan_of(const ReshardProblem& problem,
                                                                 const PlacedCluster& cluster) {
  return [&problem, &cluster](std::vector<Bytes> moved) {
    return make_plan("refit", problem, cluster,
                     PlanOptions{.chunk = Bytes{1 << 20}, .moved_bytes = std::move(moved)});
  };
}

// The busier of the two training replicas' payload bytes over their mean, when replica i is
// training ranks [i k, (i + 1) k).
inline double max_over_mean(const std::vector<std::vector<Step>>& steps, std::size_t s, std::size_t k) {
  double replica[2] = {0, 0};
  for (std::size_t r = 0; r < 2 * k; ++r)
    replica[r / k] += static_cast<double>(steps[r][s].report.bytes_sent.value);
  return std::max(replica[0], replica[1]) / (0.5 * (replica[0] + replica[1]));
}

// 8 steps of the refit plan of `problem` with the first half of its tensors frozen and the
// re-balance on: every step leaves every receiver with exactly that step's weights, every rank
// re-plans after step 1 (the first delta) and only then, and from step 3 no piece goes dense.
inline std::vector<std::vector<Step>> rebalanced_at_step_1(const ReshardProblem& problem,
                                                           const PlacedCluster& cluster,
                                                           Memory memory = Memory::kCpuCodec) {
  const auto plan = testing::plan_for(problem, cluster, "refit", Bytes{1 << 20});
  const auto steps = run_steps(problem, plan,
                               Scenario{.change_fraction = 0.02,
                                        .steps = 8,
                                        .frozen = 0.5,
                                        .rebalance = DeltaRebalance{.replan = replan_of(problem, cluster)},
                                        .memory = memory});
  for (std::int32_t r = 0; r < plan.world_size(); ++r)
    for (std::int32_t s = 0; s < 8; ++s) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
      const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
      EXPECT_FALSE(step.error) << step.error->message;
      if (step.error) continue;
      EXPECT_FALSE(step.wrong) << step.wrong->message;
      EXPECT_EQ(delta_of(step).rebalanced, s == 1);
      if (s >= 3) EXPECT_EQ(delta_of(step).full, 0);
    }
  return steps;
}

}  // namespace refit::delta_steps
