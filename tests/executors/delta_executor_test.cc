// Delta refit through the UCX executor, ranks as threads: the synthetic RL-like update changes the
// training ranks' weights step after step, and after every step every inference rank holds exactly
// the weights of that step (SyntheticShards::verify compares every byte with what it computes on
// its own), while what moves is what changed. The tests of the step's structure run twice
// (DeltaExecutorMemory): with host memory and the CPU codec, and with the NCCL executor's device
// side (DeviceDeltaMemory) whose passes run their GPU bodies on the host (HostDeltaKernels), so
// that the delta step the NCCL executor runs is the one tested here, all but the kernels.
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

namespace refit {
namespace {

using testing::make_layout;
using testing::make_reshard;
using testing::rank_range;

Plan direct_plan(const ReshardProblem& problem) {
  return testing::plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "direct", Bytes{4096});
}

// Lands each piece once on the inference node (ranks 2-3) in round 0 and relays it over NVLink to
// the other rank there in round 1.
Plan relayed_plan(const ReshardProblem& problem) {
  return testing::plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "refit", Bytes{4096});
}

// Fails a transfer (one round of a delta step) when `fail` says so, after the executor behind has
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

std::string memory_name(Memory m) {
  constexpr std::array<const char*, 3> kNames{"CpuCodec", "CpuCodecRaw", "GpuCodecBodies"};
  return kNames[static_cast<std::size_t>(m)];
}

void PrintTo(Memory m, std::ostream* os) { *os << memory_name(m); }

DeltaExecutor delta_executor(std::unique_ptr<Executor> inner, Bootstrap& bootstrap, Memory memory,
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
  std::optional<std::int32_t> fail_round;  // the round of the step that fails; nullopt: every round
  double frozen = 0.0;  // the share of the tensors that never change (SyntheticShards::make)
  std::optional<DeltaRebalance> rebalance;
  // After the last step, on every rank: its bootstrap and its buffers (sources at the last step's
  // weights, destinations as the delta refit left them).
  std::function<void(std::int32_t r, Bootstrap&, const RankBuffers&)> after_steps;
  Memory memory = Memory::kCpuCodec;
};

// Every rank's step by step outcome: [rank][step].
std::vector<std::vector<Step>> run_steps(const ReshardProblem& problem, const Plan& plan,
                                         const Scenario& sc) {
  std::vector<std::vector<Step>> out(static_cast<std::size_t>(plan.world_size()));
  testing::run_ranks(plan.world_size(), [&](std::int32_t r, Bootstrap& bootstrap) {
    auto ucx = make_ucx_executor(bootstrap, ExecutorOptions{.timeout = Seconds{20}});
    ASSERT_TRUE(ucx) << ucx.error().message;
    bool fail_now = false;
    std::int32_t round = 0;  // of the step running: the executor behind runs once a round
    const auto fails = [&] {
      const auto now = round++;
      return fail_now && (!sc.fail_round || *sc.fail_round == now);
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
      round = 0;
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
void expect_refused_on_every_rank(const ReshardProblem& problem, const Plan& plan,
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
std::vector<std::byte> destination_bytes(const RankBuffers& b) {
  std::vector<std::byte> out;
  for (const auto& d : b.destinations) out.insert(out.end(), d.bytes.begin(), d.bytes.end());
  return out;
}

const DeltaStepReport& delta_of(const Step& s) {
  EXPECT_TRUE(s.report.delta.has_value());
  static const DeltaStepReport none;
  return s.report.delta ? *s.report.delta : none;
}

class DeltaExecutorMemory : public ::testing::TestWithParam<Memory> {};

INSTANTIATE_TEST_SUITE_P(Memories, DeltaExecutorMemory,
                         ::testing::Values(Memory::kCpuCodec, Memory::kGpuCodecBodies),
                         [](const auto& info) { return memory_name(info.param); });

TEST_P(DeltaExecutorMemory, ManyStepsLeaveEveryReceiverWithExactlyEachStepsWeights) {
  const auto problem = testing::delta_problem();
  const auto plan = direct_plan(problem);
  const auto steps =
      run_steps(problem, plan, Scenario{.change_fraction = 0.02, .steps = 40, .memory = GetParam()});
  for (std::int32_t r = 0; r < 4; ++r)
    for (std::int32_t s = 0; s < 40; ++s) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
      const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
      ASSERT_FALSE(step.error) << step.error->message;
      ASSERT_FALSE(step.wrong) << step.wrong->message;
      if (r >= 2) continue;
      const auto& d = delta_of(step);
      EXPECT_GT(d.pieces, 0);
      // The first step has no baseline: every piece dense, header included. Later ones agree on
      // every baseline; 2 % of 2- and 4-byte elements changed is at most runs' k (1 + w) bytes
      // (6 % of bf16, 5 % of fp32) plus 56 header bytes a piece, well under a quarter of dense.
      if (s == 0) {
        EXPECT_EQ(d.full, d.pieces);
        EXPECT_EQ(step.report.bytes_sent, d.dense_bytes + Bytes{kDeltaHeaderBytes * d.pieces});
      } else {
        EXPECT_EQ(d.full, 0);
        EXPECT_LT(step.report.bytes_sent.value * 4, d.dense_bytes.value);
      }
    }
}

TEST_P(DeltaExecutorMemory, AStepWithNothingChangedSendsNothing) {
  const auto problem = testing::delta_problem();
  const auto steps = run_steps(problem, direct_plan(problem),
                               Scenario{.steps = 3,
                                        .hold_weights = [](std::int32_t, std::int32_t s) { return s == 2; },
                                        .memory = GetParam()});
  for (std::int32_t r = 0; r < 2; ++r) {
    const auto& held = steps[static_cast<std::size_t>(r)][2];
    ASSERT_FALSE(held.error) << held.error->message;
    EXPECT_FALSE(held.wrong);
    EXPECT_EQ(held.report.bytes_sent, Bytes{0});
    EXPECT_EQ(delta_of(held).unchanged, delta_of(held).pieces);
  }
}

// A receiver's destination byte changes between steps 2 and 3 behind refit's back: rank 2's first
// of w, or rank 3's first of r, whose box rank 0 also sends to rank 2. The receiver's audit tells
// its sender, which sends that piece densely (and only that one: rank 2's r stays a delta), and
// the step leaves every byte right again.
TEST_P(DeltaExecutorMemory, AReceiverWhoseBytesDriftedGetsThatPieceDense) {
  const auto problem = testing::delta_problem();
  for (const std::int32_t drifting : {2, 3}) {
    SCOPED_TRACE(::testing::Message() << "rank " << drifting << " drifts");
    const auto steps =
        run_steps(problem, direct_plan(problem),
                  Scenario{.steps = 5,
                           .before_step =
                               [&](std::int32_t r, std::int32_t s, RankBuffers& b) {
                                 if (r == drifting && s == 3)
                                   (r == 2 ? b.destinations.front() : b.destinations.back()).bytes[0] ^=
                                       std::byte{0x10};
                               },
                           .memory = GetParam()});
    std::int64_t full = 0;
    for (std::int32_t r = 0; r < 4; ++r)
      for (std::int32_t s = 0; s < 5; ++s) {
        const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
        ASSERT_FALSE(step.error) << step.error->message;
        EXPECT_FALSE(step.wrong) << "rank " << r << " step " << s << ": " << step.wrong->message;
        if (r < 2 && s >= 1) full += delta_of(step).full;
      }
    EXPECT_EQ(full, 1);
  }
}

// Step 2 fails after its payloads have landed, on every rank or on the receivers only: no receiver
// applies any of it (its bytes stay step 1's), and step 3 repairs everything with dense pieces
// where a sender no longer trusts, or a receiver no longer matches, its baseline.
TEST_P(DeltaExecutorMemory, AFailedStepLeavesNoHalfAppliedDeltaAndTheNextOneRepairsIt) {
  const auto problem = testing::delta_problem();
  for (const bool senders_fail_too : {true, false}) {
    SCOPED_TRACE(senders_fail_too ? "every rank fails" : "the receivers fail");
    // A receiver's destination bytes before steps 2 and 3: [rank][0 or 1].
    std::vector<std::vector<std::vector<std::byte>>> held(4, std::vector<std::vector<std::byte>>(2));
    Scenario sc{
        .steps = 4,
        .before_step =
            [&](std::int32_t r, std::int32_t s, RankBuffers& b) {
              if (s == 2 || s == 3)
                held[static_cast<std::size_t>(r)][static_cast<std::size_t>(s - 2)] = destination_bytes(b);
            },
        .fail_step = [&](std::int32_t r, std::int32_t s) { return s == 2 && (r >= 2 || senders_fail_too); },
        .memory = GetParam()};
    const auto steps = run_steps(problem, direct_plan(problem), sc);
    for (std::int32_t r = 2; r < 4; ++r) {
      const auto& failed = steps[static_cast<std::size_t>(r)][2];
      ASSERT_TRUE(failed.error);
      // Still step 1's weights, every byte: verify() compares with step 2's, which differ.
      EXPECT_TRUE(failed.wrong);
      EXPECT_EQ(held[static_cast<std::size_t>(r)][0], held[static_cast<std::size_t>(r)][1]);
      const auto& repaired = steps[static_cast<std::size_t>(r)][3];
      ASSERT_FALSE(repaired.error) << repaired.error->message;
      EXPECT_FALSE(repaired.wrong) << repaired.wrong->message;
    }
    std::int64_t full = 0;
    for (std::int32_t r = 0; r < 2; ++r) full += delta_of(steps[static_cast<std::size_t>(r)][3]).full;
    EXPECT_GT(full, 0);
  }
}

// The refit plan lands each piece once on the inference node and relays it over NVLink to the
// other rank there: the relay forwards in a second round what it decoded in the first.
TEST_P(DeltaExecutorMemory, RelayedPlansForwardWhatTheRelayDecodedExactly) {
  const auto problem = testing::delta_problem();
  const auto plan = relayed_plan(problem);
  ASSERT_TRUE(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return !t.upstream().empty(); }));
  const auto steps =
      run_steps(problem, plan, Scenario{.change_fraction = 0.02, .steps = 12, .memory = GetParam()});
  for (std::int32_t r = 0; r < 4; ++r)
    for (std::int32_t s = 0; s < 12; ++s) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
      const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
      ASSERT_FALSE(step.error) << step.error->message;
      ASSERT_FALSE(step.wrong) << step.wrong->message;
      if (s > 0 && delta_of(step).pieces > 0) {
        EXPECT_EQ(delta_of(step).full, 0);
        EXPECT_LT(step.report.bytes_sent.value * 4, delta_of(step).dense_bytes.value);
      }
    }
}

// A round whose transfers fail on one rank only (inference rank 3) fails the step on every rank,
// naming that rank and the round, instead of leaving the others waiting for it in the next round's
// audit. No rank applies the failed round (a failed round 0 leaves every byte as it was), and the
// step after leaves every receiver with exactly its weights.
TEST_P(DeltaExecutorMemory, ARoundThatFailsOnOneRankFailsTheStepOnEveryRank) {
  const auto problem = testing::delta_problem();
  for (const std::int32_t round : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "round " << round << " fails");
    // A rank's destination bytes before steps 1 and 2: [rank][0 or 1].
    std::vector<std::vector<std::vector<std::byte>>> held(4, std::vector<std::vector<std::byte>>(2));
    const auto steps =
        run_steps(problem, relayed_plan(problem),
                  Scenario{.steps = 3,
                           .before_step =
                               [&](std::int32_t r, std::int32_t s, RankBuffers& b) {
                                 if (s > 0)
                                   held[static_cast<std::size_t>(r)][static_cast<std::size_t>(s - 1)] =
                                       destination_bytes(b);
                               },
                           .fail_step = [](std::int32_t r, std::int32_t s) { return s == 1 && r == 3; },
                           .fail_round = round,
                           .memory = GetParam()});
    for (std::int32_t r = 0; r < 4; ++r) {
      SCOPED_TRACE(::testing::Message() << "rank " << r);
      const auto& failed = steps[static_cast<std::size_t>(r)][1];
      ASSERT_TRUE(failed.error);
      EXPECT_NE(failed.error->message.find("round " + std::to_string(round)), std::string::npos)
          << failed.error->message;
      EXPECT_NE(failed.error->message.find("rank 3"), std::string::npos) << failed.error->message;
      if (round == 0) EXPECT_EQ(held[static_cast<std::size_t>(r)][0], held[static_cast<std::size_t>(r)][1]);
      const auto& repaired = steps[static_cast<std::size_t>(r)][2];
      ASSERT_FALSE(repaired.error) << repaired.error->message;
      EXPECT_FALSE(repaired.wrong) << repaired.wrong->message;
    }
  }
}

// The GPU codec's payloads are DeltaCodec's without its entropy stage, byte for byte
// (tests/executors/nccl/delta_kernel_test.cc), so a delta refit whose bytes lie in the NCCL
// executor's device memory (its passes run on the host here) moves at every step, on every rank,
// exactly the bytes the host path moves with zstd off: the same payload bytes, pieces dense and
// unchanged, over 40 steps of a direct plan and 12 of a relayed one, with a drifted receiver byte
// (rank 3, before step 5) and a step that fails on every rank after its payloads land (step 7),
// every step leaving every receiver with exactly that step's weights (or, the failed one, the
// step before's).
TEST(DeltaExecutor, TheGpuCodecMovesWhatTheCpuCodecMovesAtEveryStep) {
  const auto problem = testing::delta_problem();
  const auto cluster = testing::make_test_cluster(2, 2, 2, 2);
  for (const auto* strategy : {"direct", "refit"}) {
    SCOPED_TRACE(strategy);
    const auto plan = testing::plan_for(problem, cluster, strategy, Bytes{4096});
    const std::int32_t steps = std::string_view(strategy) == "direct" ? 40 : 12;
    const auto run = [&](Memory memory) {
      return run_steps(problem, plan,
                       Scenario{.change_fraction = 0.02,
                                .steps = steps,
                                .before_step =
                                    [](std::int32_t r, std::int32_t s, RankBuffers& b) {
                                      if (r == 3 && s == 5)
                                        b.destinations.front().bytes[0] ^= std::byte{0x10};
                                    },
                                .fail_step = [](std::int32_t, std::int32_t s) { return s == 7; },
                                .memory = memory});
    };
    const auto cpu = run(Memory::kCpuCodecRaw);
    const auto gpu = run(Memory::kGpuCodecBodies);
    for (std::size_t r = 0; r < 4; ++r)
      for (std::size_t s = 0; s < static_cast<std::size_t>(steps); ++s) {
        SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
        const auto& c = cpu[r][s];
        const auto& g = gpu[r][s];
        ASSERT_EQ(c.error.has_value(), s == 7);
        ASSERT_EQ(g.error.has_value(), c.error.has_value());
        EXPECT_EQ(g.wrong.has_value(), s == 7 && r >= 2);
        EXPECT_EQ(c.wrong.has_value(), g.wrong.has_value());
        if (c.error) continue;
        EXPECT_EQ(g.report.bytes_sent, c.report.bytes_sent);
        EXPECT_EQ(g.report.bytes_received, c.report.bytes_received);
        EXPECT_EQ(delta_of(g).pieces, delta_of(c).pieces);
        EXPECT_EQ(delta_of(g).unchanged, delta_of(c).unchanged);
        EXPECT_EQ(delta_of(g).full, delta_of(c).full);
      }
  }
}

TEST(DeltaExecutor, PlansThatForwardWhatTheRelayDoesNotHoldAreRefusedOnEveryRank) {
  const auto problem = testing::delta_problem();
  // gather-broadcast gathers whole tensors at one rank, which holds most of them only to forward.
  const auto plan =
      testing::plan_for(problem, testing::make_test_cluster(2, 2, 2, 2), "gather-broadcast", Bytes{4096});
  expect_refused_on_every_rank(problem, plan, {"outside the rank's own destination shards"});
}

// 8 tensors of [2048, 1024] bf16 (4 MiB), each replicated on both training ranks (data parallel,
// each rank behind its own NIC) and split by rows over the two inference ranks. The refit plan
// balances the senders by dense bytes: its shares of 16 MiB each give the first four tensors to
// one training rank and the last four to the other.
ReshardProblem replicated_problem() {
  std::vector<TensorReshard> tensors;
  for (int t = 0; t < 8; ++t)
    tensors.push_back(make_reshard("t" + std::to_string(t), {2048, 1024},
                                   make_layout({2048, 1024}, {2}, rank_range(0, 2), "R"),
                                   make_layout({2048, 1024}, {2}, rank_range(2, 2), "S0")));
  return ReshardProblem::make(std::move(tensors), 2, 2).value();
}

std::function<Result<Plan>(std::vector<Bytes>)> replan_of(const ReshardProblem& problem,
                                                          const PlacedCluster& cluster) {
  return [&problem, &cluster](std::vector<Bytes> moved) {
    return make_plan("refit", problem, cluster,
                     PlanOptions{.chunk = Bytes{1 << 20}, .moved_bytes = std::move(moved)});
  };
}

// The busier of the two training replicas' payload bytes over their mean, when replica i is
// training ranks [i k, (i + 1) k).
double max_over_mean(const std::vector<std::vector<Step>>& steps, std::size_t s, std::size_t k) {
  double replica[2] = {0, 0};
  for (std::size_t r = 0; r < 2 * k; ++r)
    replica[r / k] += static_cast<double>(steps[r][s].report.bytes_sent.value);
  return std::max(replica[0], replica[1]) / (0.5 * (replica[0] + replica[1]));
}

// 8 steps of the refit plan of `problem` with the first half of its tensors frozen and the
// re-balance on: every step leaves every receiver with exactly that step's weights, every rank
// re-plans after step 1 (the first delta) and only then, and from step 3 no piece goes dense.
std::vector<std::vector<Step>> rebalanced_at_step_1(const ReshardProblem& problem,
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

// The first half of the tensors frozen: after step 1 (the first delta) one training rank sends
// everything and the other nothing, the payload shares drift by 1/2 (all of it in half the dense
// bytes), and every rank re-plans by step 1's payloads. Step 2 sends densely only the boxes whose
// sender changed; from step 3 on both senders carry about half the payload. Every step leaves
// every receiver with exactly that step's weights.
TEST_P(DeltaExecutorMemory, ARebalanceByThePayloadsChangesSendersAndEveryStepStaysExact) {
  const auto problem = replicated_problem();
  const auto steps = rebalanced_at_step_1(problem, testing::make_test_cluster(4, 1, 2, 2), GetParam());
  for (const auto& rank : steps) {
    EXPECT_NEAR(delta_of(rank[1]).share_drift, 0.5, 0.01);
    for (std::size_t s = 3; s < rank.size(); ++s) EXPECT_LT(delta_of(rank[s]).share_drift, 0.1);
  }
  // Before: one sender carries it all (max / mean = 2). After: within a tenth of even.
  EXPECT_NEAR(max_over_mean(steps, 1, 1), 2.0, 1e-9);
  for (std::size_t s = 3; s < 8; ++s) EXPECT_LT(max_over_mean(steps, s, 1), 1.1) << "step " << s;
}

// A plan prepared afresh (as after a re-plan, or a restarted job) has no baseline of any box, but
// its receivers already hold exactly the bytes of the step: each sender's checksum of its bytes
// equals its receivers' audit, so nothing is sent (no piece dense) and the bytes become the baseline
// of the next step, which sends only what changed.
TEST_P(DeltaExecutorMemory, AFreshPlanWhoseReceiversHoldTheBytesSendsNothing) {
  const auto problem = testing::delta_problem();
  const auto plan = direct_plan(problem);
  std::vector<std::vector<ExecutionReport>> reports(4);
  testing::run_ranks(4, [&](std::int32_t r, Bootstrap& bootstrap) {
    auto ucx = make_ucx_executor(bootstrap, ExecutorOptions{.timeout = Seconds{20}});
    ASSERT_TRUE(ucx) << ucx.error().message;
    auto executor = delta_executor(std::move(*ucx), bootstrap, GetParam());
    auto shards = HostShards::allocate(problem, Rank{r});
    auto weights =
        SyntheticShards::make(problem, shards.buffers(), SyntheticUpdate{.change_fraction = 0.02, .seed = 5});
    ASSERT_TRUE(weights);
    auto first = executor.prepare(plan, Rank{r}, shards.buffers());
    ASSERT_TRUE(first);
    ASSERT_TRUE(executor.execute(**first));  // dense: no baseline yet
    auto fresh = executor.prepare(plan, Rank{r}, shards.buffers());
    ASSERT_TRUE(fresh);
    for (int s = 0; s < 2; ++s) {
      if (s == 1) ASSERT_TRUE(weights->advance());
      auto report = executor.execute(**fresh);
      ASSERT_TRUE(report) << report.error().message;
      EXPECT_TRUE(weights->verify());
      reports[static_cast<std::size_t>(r)].push_back(*report);
    }
  });
  for (std::size_t r = 0; r < 2; ++r) {
    ASSERT_EQ(reports[r].size(), 2u);
    EXPECT_EQ(reports[r][0].bytes_sent, Bytes{0});
    EXPECT_EQ(reports[r][0].delta->full, 0);
    EXPECT_EQ(reports[r][1].delta->full, 0);
    EXPECT_LT(reports[r][1].bytes_sent.value * 4, reports[r][1].delta->dense_bytes.value);
  }
}

// Every tensor frozen: from step 1 on nothing moves, so there is nothing to balance and no plan
// changes: no drift, no re-plan, no byte sent.
TEST_P(DeltaExecutorMemory, FrozenTensorsSendNothingAndAskForNoRebalance) {
  const auto problem = replicated_problem();
  const auto cluster = testing::make_test_cluster(4, 1, 2, 2);
  const auto plan = testing::plan_for(problem, cluster, "refit", Bytes{1 << 20});
  const auto steps = run_steps(problem, plan,
                               Scenario{.steps = 3,
                                        .frozen = 1.0,
                                        .rebalance = DeltaRebalance{.replan = replan_of(problem, cluster)},
                                        .memory = GetParam()});
  for (std::int32_t r = 0; r < 4; ++r)
    for (std::int32_t s = 1; s < 3; ++s) {
      const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
      ASSERT_FALSE(step.error) << step.error->message;
      EXPECT_FALSE(step.wrong);
      EXPECT_EQ(step.report.bytes_sent, Bytes{0});
      EXPECT_EQ(delta_of(step).share_drift, 0.0);
      EXPECT_FALSE(delta_of(step).rebalanced);
    }
}

// FP8 in flight: the training ranks hold bf16 weights that the update changes, the senders
// quantise them at every step as a dense FP8 refit does and send deltas of the fp8 values and
// scales against the fp8 they last sent. quantized_test_problem: w.weight [256, 512] by rows ->
// columns twice (replicas), stacked experts with ragged blocks, a bf16 norm. After every step,
// every receiver holds what the quantizer makes of that step's bf16 (SyntheticShards::verify), for
// both schemes, a direct plan and a refit plan whose relays forward fp8 they decoded.
TEST(DeltaExecutor, Fp8InFlightLeavesEveryReceiverWithTheQuantizersBytesAtEveryStep) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  for (const auto scheme : all_quant_schemes())
    for (const auto* strategy : {"direct", "refit"}) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      const auto problem = testing::quantized_test_problem(scheme);
      const auto plan = testing::plan_for(problem, cluster, strategy, Bytes{4096});
      // The refit plan relays the experts' fp8 to the replica on the same node (ranks 2 and 3).
      EXPECT_EQ(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return !t.upstream().empty(); }),
                std::string_view(strategy) == "refit");
      const auto steps = run_steps(problem, plan, Scenario{.change_fraction = 0.02, .steps = 12});
      for (std::int32_t r = 0; r < plan.world_size(); ++r)
        for (std::int32_t s = 0; s < 12; ++s) {
          SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
          const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
          ASSERT_FALSE(step.error) << step.error->message;
          ASSERT_FALSE(step.wrong) << step.wrong->message;
          // After the first (dense) step every piece has a baseline both ends agree on.
          if (s > 0) EXPECT_EQ(delta_of(step).full, 0);
          // A sender quantised before it encoded (a receiver has nothing to quantise).
          EXPECT_EQ(step.report.work.quantize.has_value(), r < 2);
        }
    }
}

// After the last delta step: a dense FP8 refit of the same bf16 (QuantizingExecutor over UCX, into
// fresh destination buffers) gives every receiver byte for byte what the delta refit left it.
std::function<void(std::int32_t, Bootstrap&, const RankBuffers&)> equals_dense_fp8(
    const ReshardProblem& problem, const Plan& plan) {
  return [&problem, &plan](std::int32_t r, Bootstrap& bootstrap, const RankBuffers& delta) {
    const ExecutorOptions options{.timeout = Seconds{20}};
    auto ucx = make_ucx_executor(bootstrap, options);
    ASSERT_TRUE(ucx) << ucx.error().message;
    QuantizingExecutor dense(std::move(*ucx), bootstrap, options.staging);
    RankBuffers fresh = delta;
    std::vector<std::vector<std::byte>> memory;
    for (auto& d : fresh.destinations) d.bytes = memory.emplace_back(d.bytes.size());
    auto prepared = dense.prepare(plan, Rank{r}, fresh);
    ASSERT_TRUE(prepared) << prepared.error().message;
    ASSERT_TRUE(dense.execute(**prepared));
    for (std::size_t i = 0; i < fresh.destinations.size(); ++i)
      EXPECT_TRUE(std::ranges::equal(fresh.destinations[i].bytes, delta.destinations[i].bytes))
          << "rank " << r << ": tensor " << problem.tensors()[delta.destinations[i].tensor].tensor.name;
  };
}

// The same invariant against the dense path itself, after 8 delta steps of a relayed plan.
TEST_P(DeltaExecutorMemory, Fp8DeltasEqualADenseFp8RefitOfTheSameWeights) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  for (const auto scheme : all_quant_schemes()) {
    SCOPED_TRACE(quant_scheme_name(scheme));
    const auto problem = testing::quantized_test_problem(scheme);
    const auto plan = testing::plan_for(problem, cluster, "refit", Bytes{4096});
    const auto steps = run_steps(problem, plan,
                                 Scenario{.change_fraction = 0.05,
                                          .steps = 8,
                                          .after_steps = equals_dense_fp8(problem, plan),
                                          .memory = GetParam()});
    for (const auto& rank : steps)
      for (const auto& step : rank) ASSERT_FALSE(step.error) << step.error->message;
  }
}

// Weights trained in fp8: the training ranks hold the fp8 values and scales, which an fp8 trainer
// makes at every step from its bf16 master (SyntheticShards: the update on the master, then the
// quantizer of the rank's box, whole blocks). The delta executor moves them as plain bytes, encoded
// against what it last sent, and quantises nothing. quantized_test_problem trained in fp8, both
// schemes, a direct plan and a refit plan that relays: after every one of 12 steps every receiver
// holds what the quantizer makes of its box of that step's master (blocks are whole on both sides,
// so it is the training rank's bytes of the box), no piece goes dense after the first step, and a
// step sends less than the dense bytes; after the last, a dense refit of the same fp8 into fresh
// buffers gives the same bytes.
TEST(DeltaExecutor, WeightsTrainedInFp8MoveAsDeltasOfTheirBytesExactlyAtEveryStep) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  for (const auto scheme : all_quant_schemes())
    for (const auto* strategy : {"direct", "refit"}) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      const auto problem = testing::quantized_test_problem(scheme, QuantSite::kTraining);
      ASSERT_EQ(problem.tensors().front().tensor.quantization->site, QuantSite::kTraining);
      const auto plan = testing::plan_for(problem, cluster, strategy, Bytes{4096});
      EXPECT_EQ(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return !t.upstream().empty(); }),
                std::string_view(strategy) == "refit");
      const auto steps = run_steps(
          problem, plan,
          Scenario{.change_fraction = 0.02, .steps = 12, .after_steps = equals_dense_fp8(problem, plan)});
      for (std::int32_t r = 0; r < plan.world_size(); ++r)
        for (std::int32_t s = 0; s < 12; ++s) {
          SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
          const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
          ASSERT_FALSE(step.error) << step.error->message;
          ASSERT_FALSE(step.wrong) << step.wrong->message;
          EXPECT_FALSE(step.report.work.quantize.has_value());
          if (s == 0 || delta_of(step).pieces == 0) continue;
          EXPECT_EQ(delta_of(step).full, 0);
          EXPECT_LT(step.report.bytes_sent, delta_of(step).dense_bytes);
        }
    }
}

// A failed FP8 step (every receiver fails after its payloads landed) leaves each receiver with the
// previous step's fp8, and a drifted fp8 byte at a receiver makes that piece dense; the steps after
// each repair every byte.
TEST(DeltaExecutor, Fp8AFailedStepLeavesNoHalfDeltaAndDriftIsRepaired) {
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  const auto problem = testing::quantized_test_problem(QuantScheme::kFp8Block128);
  const auto plan = testing::plan_for(problem, cluster, "direct", Bytes{4096});
  std::vector<std::vector<std::vector<std::byte>>> held(6, std::vector<std::vector<std::byte>>(2));
  Scenario sc{.steps = 6,
              .before_step =
                  [&](std::int32_t r, std::int32_t s, RankBuffers& b) {
                    if (s == 2 || s == 3)
                      held[static_cast<std::size_t>(r)][static_cast<std::size_t>(s - 2)] =
                          destination_bytes(b);
                    if (r == 3 && s == 4) b.destinations.front().bytes[0] ^= std::byte{0x10};
                  },
              .fail_step = [](std::int32_t r, std::int32_t s) { return s == 2 && r >= 2; }};
  const auto steps = run_steps(problem, plan, sc);
  for (std::int32_t r = 2; r < 6; ++r) {
    SCOPED_TRACE(::testing::Message() << "rank " << r);
    const auto& failed = steps[static_cast<std::size_t>(r)][2];
    ASSERT_TRUE(failed.error);
    EXPECT_EQ(held[static_cast<std::size_t>(r)][0], held[static_cast<std::size_t>(r)][1]);
    for (const std::size_t s : {3u, 4u, 5u}) {
      ASSERT_FALSE(steps[static_cast<std::size_t>(r)][s].error);
      EXPECT_FALSE(steps[static_cast<std::size_t>(r)][s].wrong) << "step " << s;
    }
  }
  // Step 4: only rank 3's drifted piece of w.weight goes dense (its sender, training rank 0 or 1).
  std::int64_t full = 0;
  for (std::int32_t r = 0; r < 2; ++r) full += delta_of(steps[static_cast<std::size_t>(r)][4]).full;
  EXPECT_EQ(full, 1);
}

// cut.weight [256, 96]: training ranks 0-3 hold 24 columns each, cutting its 128x128 (one ragged
// 128x96 per 128 rows) and its 1x32 blocks, so it is quantised at its landing ranks (one replica
// of the inference layout, rows over ranks 4-5 or 6-7). A step moves the bf16 landing copy as deltas, each
// landing rank quantises its box at the start of the next round, and the fp8 goes to the other replica as
// deltas in the round after. Every step, every inference rank holds what the quantizer makes of that step's
// bf16 (and the landing ranks their copy's bf16), and after 8 steps exactly what a dense FP8 refit gives.
ReshardProblem landing_problem(QuantScheme scheme) {
  const Shape w{256, 96};
  const auto bf16 =
      ReshardProblem::make({make_reshard("cut.weight", w, make_layout(w, {4}, rank_range(0, 4), "S1"),
                                         make_layout(w, {2, 2}, rank_range(4, 4), "R,S0"))},
                           4, 4)
          .value();
  return quantize_problem(bf16, {.scheme = scheme, .site = QuantSite::kLanding},
                          [](const TensorSpec&) { return true; })
      .value();
}

TEST(DeltaExecutor, Fp8AtLandingRanksMovesTheCopyAsDeltasAndEveryStepIsExact) {
  const auto cluster = testing::make_test_cluster(4, 2, 4, 4);
  for (const auto scheme : all_quant_schemes())
    for (const auto* strategy : {"direct", "refit"}) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      const auto problem = landing_problem(scheme);
      const auto plan = testing::plan_for(problem, cluster, strategy, Bytes{4096});
      ASSERT_TRUE(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return t.quantises(); }));
      const auto steps = run_steps(
          problem, plan,
          Scenario{.change_fraction = 0.02, .steps = 8, .after_steps = equals_dense_fp8(problem, plan)});
      for (std::int32_t r = 0; r < plan.world_size(); ++r)
        for (std::int32_t s = 0; s < 8; ++s) {
          SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
          const auto& step = steps[static_cast<std::size_t>(r)][static_cast<std::size_t>(s)];
          ASSERT_FALSE(step.error) << step.error->message;
          ASSERT_FALSE(step.wrong) << step.wrong->message;
          if (s > 0) EXPECT_EQ(delta_of(step).full, 0);
        }
    }
}

// Re-balancing a plan with landing ranks. 8 weights [8192, 192] bf16 (3 MiB) held by two
// data-parallel training replicas (ranks 0-1 and 2-3, each rank its own node and NIC), split by
// columns within each (96 columns: the 128 x 128 blocks are cut), so each is quantised at its
// landing ranks, the inference ranks 4-7 (by rows: whole blocks; one replica, so the fp8 goes
// nowhere after the quantise step). The dense plan sends the first weights' landing copies from
// one replica and the rest from the other; with the first half of the weights frozen, step 1 (the
// first delta) finds the payload on one replica: its shares drift (the fp8 the landing ranks make
// moves nothing: it weighs 0), every rank re-plans by the payloads (the planner weighs the landing
// copies by them), and the new plan spreads the changing copies over both replicas. Every step
// leaves every inference rank with the quantizer's bytes of that step's bf16 (and its landing copy),
// and from step 3 the two replicas' payloads are within a tenth of even.
ReshardProblem replicated_landing_problem() {
  const Shape w{8192, 192};
  std::vector<TensorReshard> tensors;
  for (int t = 0; t < 8; ++t)
    tensors.push_back(make_reshard("t" + std::to_string(t) + ".weight", w,
                                   make_layout(w, {2, 2}, rank_range(0, 4), "R,S1"),
                                   make_layout(w, {4}, rank_range(4, 4), "S0")));
  return quantize_problem(ReshardProblem::make(std::move(tensors), 4, 4).value(),
                          {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding},
                          [](const TensorSpec&) { return true; })
      .value();
}

TEST(DeltaExecutor, ARebalanceOfAPlanWithLandingRanksChangesSendersAndEveryStepStaysExact) {
  const auto problem = replicated_landing_problem();
  const auto cluster = testing::make_test_cluster(8, 1, 4, 4);
  ASSERT_TRUE(std::ranges::any_of(testing::plan_for(problem, cluster, "refit", Bytes{1 << 20}).transfers,
                                  [](const Transfer& t) { return t.quantises(); }));
  const auto steps = rebalanced_at_step_1(problem, cluster);
  EXPECT_NEAR(max_over_mean(steps, 1, 2), 2.0, 1e-9);
  for (std::size_t s = 3; s < 8; ++s) EXPECT_LT(max_over_mean(steps, s, 2), 1.1) << "step " << s;
}

}  // namespace
}  // namespace refit
