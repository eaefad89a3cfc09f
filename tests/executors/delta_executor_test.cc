// Delta refit through the UCX executor, ranks as threads: the synthetic RL-like update changes the
// training ranks' weights step after step, and after every step every inference rank holds exactly
// the weights of that step (SyntheticShards::verify compares every byte with what it computes on
// its own), while what moves is what changed. The tests of the step's structure run twice
// (DeltaExecutorMemory): with host memory and the CPU codec, and with the NCCL executor's device
// side (DeviceDeltaMemory) whose passes run their GPU bodies on the host (HostDeltaKernels), so
// that the delta step the NCCL executor runs is the one tested here, all but the kernels.
#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>

#include <gtest/gtest.h>

#include "delta_steps.h"
#include "refit/executors/delta_schedule.h"

namespace refit {
namespace {

using namespace delta_steps;  // NOLINT(google-build-using-namespace): the tests' own scaffolding

INSTANTIATE_TEST_SUITE_P(Memories, DeltaExecutorMemory,
                         ::testing::Values(Memory::kCpuCodec, Memory::kGpuCodecBodies),
                         [](const auto& info) { return memory_name(info.param); });

TEST_P(DeltaExecutorMemory, ManyStepsLeaveEveryReceiverWithExactlyEachStepsWeights) {
  const auto problem = testing::delta_problem();
  const auto plan = direct_plan(problem);
  const auto steps =
      run_steps(problem, plan, Scenario{.change_fraction = 0.02, .steps = 40, .memory = GetParam()});
  for_each_exact_step(steps, [&](std::int32_t r, std::int32_t s, const Step& step) {
    if (r >= 2) return;
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
  });
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
// other rank there: the relay forwards the payloads as they arrived, and decodes its own copy.
TEST_P(DeltaExecutorMemory, RelayedPlansForwardWhatTheRelayReceivedExactly) {
  const auto problem = testing::delta_problem();
  const auto plan = relayed_plan(problem);
  ASSERT_TRUE(std::ranges::any_of(plan.transfers, [](const Transfer& t) { return !t.upstream().empty(); }));
  const auto steps =
      run_steps(problem, plan, Scenario{.change_fraction = 0.02, .steps = 12, .memory = GetParam()});
  for_each_exact_step(steps, [&](std::int32_t, std::int32_t s, const Step& step) {
    if (s > 0 && delta_of(step).pieces > 0) {
      EXPECT_EQ(delta_of(step).full, 0);
      EXPECT_LT(step.report.bytes_sent.value * 4, delta_of(step).dense_bytes.value);
    }
  });
}

// Records, on every execute of the executor behind, the payload bytes each transfer brought the
// rank, by the refit plan's transfer whose payloads they are (the step's tensor "delta payloads of
// transfer N", delta_step.h), into `received` at [step][transfer].
class RecordingStep final : public Executor {
 public:
  using Received = std::map<std::pair<std::int32_t, std::int32_t>, std::vector<std::byte>>;
  RecordingStep(std::unique_ptr<Executor> inner, const std::int32_t& step, Received& received,
                std::mutex& lock)
      : inner_(std::move(inner)), step_(&step), received_(&received), lock_(&lock) {}
  std::string_view name() const override { return inner_->name(); }
  ExecutorCapabilities capabilities() const override { return inner_->capabilities(); }
  Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                const RankBuffers& buffers) override {
    plan_ = plan;
    buffers_ = buffers;
    return inner_->prepare(plan, rank, buffers);
  }
  Result<ExecutionReport> execute(PreparedPlan& prepared) override {
    auto report = inner_->execute(prepared);
    const std::lock_guard hold(*lock_);
    for (const auto& d : buffers_.destinations) {
      const auto& name = plan_.tensors[d.tensor].name;
      const auto transfer = std::stoi(name.substr(name.rfind(' ') + 1));
      (*received_)[{*step_, transfer}].assign(d.bytes.begin(), d.bytes.end());
    }
    return report;
  }

 private:
  std::unique_ptr<Executor> inner_;
  const std::int32_t* step_;
  Received* received_;
  std::mutex* lock_;
  Plan plan_;
  RankBuffers buffers_;
};

// The piece payloads of a transfer's payloads, which lie back to back: each a header and the body
// whose size the header gives at byte 32 (docs/delta.md, "The payload format").
std::vector<std::vector<std::byte>> piece_payloads(const std::vector<std::byte>& payloads) {
  std::vector<std::vector<std::byte>> out;
  for (std::size_t at = 0; at + kDeltaHeaderBytes <= payloads.size();) {
    std::uint64_t body = 0;
    std::memcpy(&body, payloads.data() + at + 32, 8);
    const auto end = std::min(payloads.size(), at + kDeltaHeaderBytes + body);
    out.emplace_back(payloads.begin() + static_cast<std::ptrdiff_t>(at),
                     payloads.begin() + static_cast<std::ptrdiff_t>(end));
    at = end;
  }
  return out;
}

// The relayed plan's relays forward whole boxes as they arrived (delta_schedule.h): one round of
// the codec, two hops. At every one of 6 steps (dense at first, deltas after, one with nothing
// changed) every piece payload a relay forwards is, byte for byte, one the transfers it forwards
// from brought it that step, and every receiver ends each step with exactly its weights.
TEST_P(DeltaExecutorMemory, ARelayForwardsThePayloadsItReceivedByteForByte) {
  const auto problem = testing::delta_problem();
  const auto plan = relayed_plan(problem);
  const auto schedule = delta_schedule(plan);
  ASSERT_EQ(schedule.hops, std::vector<std::int32_t>{2});
  RecordingStep::Received received;
  std::mutex lock;
  std::vector<std::vector<Step>> steps(4);
  testing::run_ranks(4, [&](std::int32_t r, Bootstrap& bootstrap) {
    auto ucx = make_ucx_executor(bootstrap, ExecutorOptions{.timeout = Seconds{20}});
    ASSERT_TRUE(ucx) << ucx.error().message;
    std::int32_t s = 0;
    auto executor = delta_executor(std::make_unique<RecordingStep>(std::move(*ucx), s, received, lock),
                                   bootstrap, GetParam());
    auto shards = HostShards::allocate(problem, Rank{r});
    auto weights =
        SyntheticShards::make(problem, shards.buffers(), SyntheticUpdate{.change_fraction = 0.02, .seed = 5});
    ASSERT_TRUE(weights);
    auto prepared = executor.prepare(plan, Rank{r}, shards.buffers());
    ASSERT_TRUE(prepared) << prepared.error().message;
    for (; s < 6; ++s) {
      if (s > 0 && s != 3) ASSERT_TRUE(weights->advance());
      auto report = executor.execute(**prepared);
      ASSERT_TRUE(report) << report.error().message;
      EXPECT_TRUE(weights->verify()) << "rank " << r << " step " << s;
    }
  });
  std::int32_t compared = 0;
  for (const auto& t : plan.transfers) {
    if (t.segments.front().via == kFromSourceShard) continue;
    for (std::int32_t s = 0; s < 6; ++s) {
      SCOPED_TRACE(::testing::Message() << "transfer " << t.id << " step " << s);
      std::vector<std::vector<std::byte>> arrived;
      for (const auto u : t.upstream())
        if (const auto it = received.find({s, u}); it != received.end())
          std::ranges::copy(piece_payloads(it->second), std::back_inserter(arrived));
      const auto forwarded = received.find({s, t.id});
      if (forwarded == received.end()) continue;
      for (const auto& payload : piece_payloads(forwarded->second)) {
        EXPECT_NE(std::ranges::find(arrived, payload), arrived.end());
        ++compared;
      }
    }
  }
  // Steps 0-2, 4 and 5 move at least one piece through the relays (step 3 changed nothing).
  EXPECT_GE(compared, 5);
}

// A hop whose transfers fail on one rank only (inference rank 3) fails the step on every rank,
// naming that rank, the round and the hop, instead of leaving the others waiting for it in the next
// hop. No rank applies any of the failed step: a round decodes only once its last hop has moved, so
// a failed hop 1 (the relays forwarding) leaves every byte as it was too; and the step after leaves
// every receiver with exactly its weights.
TEST_P(DeltaExecutorMemory, AHopThatFailsOnOneRankFailsTheStepOnEveryRank) {
  const auto problem = testing::delta_problem();
  for (const std::int32_t hop : {0, 1}) {
    SCOPED_TRACE(::testing::Message() << "hop " << hop << " fails");
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
                           .fail_hop = hop,
                           .memory = GetParam()});
    for (std::int32_t r = 0; r < 4; ++r) {
      SCOPED_TRACE(::testing::Message() << "rank " << r);
      const auto& failed = steps[static_cast<std::size_t>(r)][1];
      ASSERT_TRUE(failed.error);
      EXPECT_NE(failed.error->message.find("round 0, hop " + std::to_string(hop)), std::string::npos)
          << failed.error->message;
      EXPECT_NE(failed.error->message.find("rank 3"), std::string::npos) << failed.error->message;
      EXPECT_EQ(held[static_cast<std::size_t>(r)][0], held[static_cast<std::size_t>(r)][1]);
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

// The first half of the tensors frozen: after step 1 (the first delta) one training rank sends
// everything and the other nothing, the payload shares drift by 1/2 (all of it in half the dense
// bytes), and every rank re-plans by step 1's payloads. Step 2 sends densely only the boxes whose
// sender changed; from step 3 on both senders carry about half the payload. Every step leaves
// every receiver with exactly that step's weights.
TEST_P(DeltaExecutorMemory, ARebalanceByThePayloadsChangesSendersAndEveryStepStaysExact) {
  const auto problem = replicated_problem();
  const auto steps = rebalanced_at_step_1(problem, testing::make_test_cluster(4, 1, 2, 2), GetParam());
  for (const auto& rank : steps) {
    EXPECT_NEAR(delta_of(rank[1]).share_drift.value_or(-1), 0.5, 0.01);
    for (std::size_t s = 3; s < rank.size(); ++s) EXPECT_LT(delta_of(rank[s]).share_drift.value_or(1), 0.1);
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
      EXPECT_EQ(delta_of(step).share_drift, std::optional(0.0));  // measured: re-balancing was asked for
      EXPECT_FALSE(delta_of(step).rebalanced);
    }
}

}  // namespace
}  // namespace refit
