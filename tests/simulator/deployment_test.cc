// Deployments: which strategies each runs, and the calls it cuts a plan into, checked on a small
// hand-built pipeline-parallel MoE problem where every buffer, ring and call can be counted by
// hand; NCCL's latency formulas with tuning.cc's constants; NeMo RL's Ray fan-out; refit's own
// deployment predicting exactly what the plan alone does.
#include <algorithm>

#include <gtest/gtest.h>

#include "call_builder.h"
#include "quantize_work.h"
#include "ray_dispatch.h"
#include "refit/core/quantized_problem.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/deployment.h"
#include "refit/simulator/nccl_cost_model.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/simulator/sensitivity.h"
#include "test_cluster.h"
#include "test_problems.h"
#include "training_export.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

constexpr double kUs = 1e-6;

// Training: 2 pipeline stages of 2 ranks (0,1 and 2,3); inference: ranks 4,5, replicated.
// t0 = layer 0's stacked experts [4, 8, 16] on stage 0, expert parallel over ranks 0,1;
// t1 = layer 1's on stage 1 (ranks 2,3); t2 = layer 0's q_proj [16, 16], tensor parallel on 0,1.
// bf16: t0 and t1 are 1024 B (256 B per expert), t2 512 B.
ReshardProblem pipeline_moe() {
  const Shape experts{4, 8, 16}, q{16, 16};
  const auto stacked = [&](std::string name, std::int32_t first) {
    return testing::make_reshard(std::move(name), experts,
                                 make_layout(experts, {2}, rank_range(first, 2), "S0"),
                                 make_layout(experts, {2}, rank_range(4, 2), "R"));
  };
  return ReshardProblem::make({stacked("model.layers.0.mlp.experts.gate_proj", 0),
                               stacked("model.layers.1.mlp.experts.gate_proj", 2),
                               testing::make_reshard("model.layers.0.self_attn.q_proj.weight", q,
                                                     make_layout(q, {2}, rank_range(0, 2), "S0"),
                                                     make_layout(q, {2}, rank_range(4, 2), "R"))},
                              4, 2)
      .value();
}

// pipeline_moe with its experts (t0, t1) quantized at the receivers, q_proj (t2) left bf16.
ReshardProblem experts_cast_at_receivers() {
  return quantize_problem(pipeline_moe(), {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kReceiver},
                          [](const TensorSpec& t) { return t.name.find("experts") != std::string::npos; })
      .value();
}

PlacedCluster two_nodes(Bytes memory = Bytes{80'000'000'000}) {
  return testing::make_test_cluster(2, 4, 4, 2, 50, 400, memory);
}

std::vector<const Call*> calls_in(const CallSchedule& s, std::string_view group) {
  std::vector<const Call*> out;
  for (const auto& c : s.calls)
    if (c.group == group) out.push_back(&c);
  return out;
}

TEST(Deployment, EachStrategyHasADefaultAndImpossiblePairsAreRefusedNamingBoth) {
  EXPECT_EQ(default_deployment(strategy_info(StrategyId::kRefit)).id, DeploymentId::kRefit);
  EXPECT_EQ(default_deployment(strategy_info(StrategyId::kGatherBroadcast)).id, DeploymentId::kNemoRl);
  EXPECT_EQ(default_deployment(strategy_info(StrategyId::kM2nRing)).id, DeploymentId::kNemoRl);
  EXPECT_EQ(default_deployment(strategy_info(StrategyId::kDirect)).id, DeploymentId::kNemoRl);
  for (const auto& d : deployments())
    for (const auto& s : strategies()) {
      const auto runs = check_runs(d, s);
      const bool expected = d.id == DeploymentId::kRefit || d.id == DeploymentId::kRefitNccl ||
                            (d.id == DeploymentId::kNemoRl && s.id != StrategyId::kRefit) ||
                            ((d.id == DeploymentId::kM2nBench || d.id == DeploymentId::kM2nBenchAll) &&
                             (s.id == StrategyId::kM2nRing || s.id == StrategyId::kDirect));
      EXPECT_EQ(runs.has_value(), expected) << d.name << " " << s.name;
      if (!runs) {
        EXPECT_NE(runs.error().message.find(std::string(d.name)), std::string::npos);
        EXPECT_NE(runs.error().message.find(std::string(s.name)), std::string::npos);
      }
    }
  const auto unknown = find_deployment("slurm");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("nemo-rl"), std::string::npos);
}

TEST(NcclCostModel, LatenciesFollowTuningCc) {
  const NcclLatencies l;
  // Broadcast: base 8.4 + one hop: NVLink 4.0 inside a domain, network 14 across.
  EXPECT_NEAR(broadcast_latency(l, {.ranks = 8, .domains = 1}).value, 12.4 * kUs, 1e-12);
  EXPECT_NEAR(broadcast_latency(l, {.ranks = 384, .domains = 48}).value, 22.4 * kUs, 1e-12);
  // All-gather over 8 ranks in a domain: 8.4 + 7 x 3.4 = 32.2; over 16 ranks in 2 domains:
  // 8.4 + 14 x max(3.4, 3) + 1 x 14 = 70.0.
  EXPECT_NEAR(all_gather_latency(l, {.ranks = 8, .domains = 1}).value, 32.2 * kUs, 1e-12);
  EXPECT_NEAR(all_gather_latency(l, {.ranks = 16, .domains = 2}).value, 70.0 * kUs, 1e-12);
  // Barrier (Tree LL) over 16 ranks in 2 domains: 6.8 + 2 (7 x 0.6 + log2(2) x 5) = 25.2.
  EXPECT_NEAR(barrier_latency(l, {.ranks = 16, .domains = 2}).value, 25.2 * kUs, 1e-12);
}

TEST(TrainingExport, StagesAndTasksFollowTheSourceLayouts) {
  const auto p = pipeline_moe();
  const auto stages = sim::find_stages(p).value();
  ASSERT_EQ(stages.ranks.size(), 2u);
  EXPECT_EQ(stages.ranks[1], rank_range(2, 2));
  EXPECT_EQ(stages.stage_of_tensor, (std::vector<std::int32_t>{0, 1, 0}));
  // t1: 2 local experts on its owner, one task each: broadcast 256 B from rank 2 to its stage-0
  // peer 0, then an all-gather over the expert ranks, as rank 0's stage sees them, to 512 B: two
  // HF tensors per task.
  const auto tasks = sim::export_tasks(p, stages, {1});
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0].local.value, 256);
  EXPECT_EQ(tasks[0].full.value, 512);
  EXPECT_EQ(tasks[0].hf_tensors, 2);
  EXPECT_EQ(tasks[0].pipeline, (std::vector{Rank{2}, Rank{0}}));
  ASSERT_EQ(tasks[0].gathers.size(), 1u);
  EXPECT_EQ(tasks[0].gathers[0].ring, rank_range(0, 2));
  EXPECT_EQ(tasks[0].gathers[0].gathered.value, 512);
}

TEST(TrainingExport, UnequalStagesAreRefused) {
  const Shape s{8, 8};
  const auto p =
      ReshardProblem::make({testing::make_reshard("a", s, make_layout(s, {2}, rank_range(0, 2), "S0"),
                                                  make_layout(s, {1}, rank_range(3, 1), "R")),
                            testing::make_reshard("b", s, make_layout(s, {1}, rank_range(2, 1), "R"),
                                                  make_layout(s, {1}, rank_range(3, 1), "R"))},
                           3, 1)
          .value();
  const auto stages = sim::find_stages(p);
  ASSERT_FALSE(stages);
  EXPECT_NE(stages.error().message.find("differ in size"), std::string::npos);
}

TEST(NemoRlCollective, BuffersCloseOnceTheyExceedTheTarget) {
  // Target min(0.02 x 80 GB, cap 600 B) = 600 B. HF tensors in order: t0's four experts (256 B
  // each), t1's four, t2 (512 B). Buffers close after exceeding 600: 256+256+256 = 768 | 768 |
  // 256+256+512 = 1024: three broadcasts, three tensors each, each followed by load_weights'
  // host loop of 3 x 5 eager ops of 4.72 us.
  const auto p = pipeline_moe();
  const auto c = two_nodes();
  const auto plan = make_plan("gather-broadcast", p, c).value();
  const DeploymentConstants k{.buffer_cap = Bytes{600}};
  const auto s = deploy(deployment_info(DeploymentId::kNemoRl), plan, p, c, k).value();
  const auto broadcasts = calls_in(s, "packed broadcast");
  ASSERT_EQ(broadcasts.size(), 3u);
  const std::int64_t bytes[] = {768, 768, 1024};
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_TRUE(broadcasts[i]->collective);
    EXPECT_EQ(broadcasts[i]->collective->bytes.value, bytes[i]);
    EXPECT_EQ(broadcasts[i]->collective->ranks, rank_range(0, 6));
    EXPECT_NEAR(broadcasts[i]->finish.value, 3 * 5 * 4.72 * kUs, 1e-12);
    EXPECT_EQ(broadcasts[i]->copies_before.front().bytes.value, bytes[i]);  // rank 0's torch.cat
  }
  // Buffer 0 exports t0's two tasks: one pipeline broadcast run (2 calls, 512 B) and one
  // all-gather run (2 calls, 1024 B), each paying two launches and two NCCL latencies.
  const auto exports = calls_in(s, "export pipeline broadcast");
  ASSERT_FALSE(exports.empty());
  EXPECT_EQ(exports[0]->collective->bytes.value, 512);
  EXPECT_NEAR(exports[0]->launch.value, 2 * 3.0 * kUs, 1e-12);
  EXPECT_NEAR(exports[0]->collective->latency.value,
              2 * broadcast_latency(NcclLatencies{}, {.ranks = 2, .domains = 1}).value, 1e-12);
  EXPECT_EQ(calls_in(s, "export all-gather")[0]->collective->bytes.value, 1024);
  // Double buffering: buffer 2's broadcast waits for buffer 0's load_weights copies.
  const auto unpack0 = static_cast<std::int32_t>(
      std::ranges::find(s.calls, std::string("load_weights 0"), &Call::label) - s.calls.begin());
  EXPECT_NE(std::ranges::find(broadcasts[2]->after, unpack0), broadcasts[2]->after.end());
  PlanSimulationOptions o{.calls = &s};
  const auto sim = simulate_plan(plan, p, c, o).value();
  EXPECT_GT(sim.breakdown[TimeKind::kFixed].value, 0);
}

TEST(NemoRlCollective, WithFp8AtTheReceiversLoadWeightsCastsEachWeightThenCopiesItsFp8) {
  // The experts (t0, t1) quantized at the receivers, q_proj (t2) left bf16. The wire stays bf16,
  // so the buffers are those of the bf16 refit: t0's experts 0-2 | t0's 3, t1's 0-1 | t1's 2-3
  // and t2. Each load_weights first casts the buffer's expert weights whole (256 B of bf16 each,
  // on every inference rank: the cast comes before vLLM narrows a weight), then copies what rank
  // 4 keeps of them (all of it: the destinations are replicated) as fp8: an expert's 128
  // elements are 128 B of values and one fp32 scale (a [1, 128, 128] block), 132 B.
  //   cast:   768 | 768 | 512 B;  copied: 3 x 132 = 396 | 396 | 2 x 132 + 512 = 776 B.
  // Only the last buffer's tail is on the path to the end: it was a copy of 1024 B, and is now
  // a cast of 512 B and then a copy of 776 B.
  const auto bf16 = pipeline_moe();
  const auto fp8 = experts_cast_at_receivers();
  const auto c = two_nodes();
  const DeploymentConstants k{.buffer_cap = Bytes{600}};
  const auto predict = [&](const ReshardProblem& p) {
    const auto plan = make_plan("gather-broadcast", p, c).value();
    auto s = deploy(deployment_info(DeploymentId::kNemoRl), plan, p, c, k).value();
    PlanSimulationOptions o{.calls = &s};
    return std::pair{s, simulate_plan(plan, p, c, o).value()};
  };
  const auto [plain, before] = predict(bf16);
  const auto [quantized, after] = predict(fp8);
  const auto loads = calls_in(quantized, "load_weights copies");
  const std::int64_t cast[] = {768, 768, 512};
  const std::int64_t copied[] = {396, 396, 776};
  ASSERT_EQ(loads.size(), 3u);
  for (std::size_t i = 0; i < 3; ++i) {
    ASSERT_EQ(loads[i]->quantizes.size(), 1u);
    EXPECT_EQ(loads[i]->quantizes[0].rank, Rank{4});
    EXPECT_EQ(loads[i]->quantizes[0].bytes.value, cast[i]);
    EXPECT_EQ(loads[i]->copies_after[0].bytes.value, copied[i]);
  }
  EXPECT_TRUE(calls_in(plain, "load_weights copies")[0]->quantizes.empty());
  EXPECT_FALSE(quantized.quantize_landed);  // the calls say who quantizes
  const GpuSpec& gpu = c.cluster().gpu(c.gpu_of(Rank{4}));
  const Seconds cast_last = sim::quantize_time(Bytes{512}, QuantScheme::kFp8Block128, gpu);
  const double copy_saved = (1024.0 - 776.0) / gpu.copy_bandwidth.value;
  EXPECT_GT(cast_last.value, 0);
  EXPECT_NEAR(after.predicted.value - before.predicted.value, cast_last.value - copy_saved, 1e-15);
  EXPECT_NEAR(after.breakdown[TimeKind::kQuantize].value, cast_last.value, 1e-15);
  EXPECT_TRUE(std::ranges::any_of(
      quantized.notes, [](const std::string& n) { return n.find("fp8.load_weights") != std::string::npos; }));
}

TEST(NemoRlCollective, WithoutGpuMemoryTheBuffersTakeTheirCapAndSaySo) {
  // Cap 600 B, as with memory: the same three buffers, and a note naming the cluster.
  const auto p = pipeline_moe();
  const auto c = two_nodes(Bytes{0});
  const auto plan = make_plan("gather-broadcast", p, c).value();
  const auto s =
      deploy(deployment_info(DeploymentId::kNemoRl), plan, p, c, {.buffer_cap = Bytes{600}}).value();
  EXPECT_EQ(calls_in(s, "packed broadcast").size(), 3u);
  ASSERT_EQ(s.notes.size(), 1u);
  EXPECT_NE(s.notes[0].find("cluster 'test'"), std::string::npos) << s.notes[0];
  EXPECT_NE(s.notes[0].find("memory_gb"), std::string::npos);
}

TEST(NemoRlReshard, OneM2nCallPerFfnParameterOnItsStageThenTheRestBroadcast) {
  // t0 and t1 are bulk (routed experts): one M2N call each, on queues 0 and 1; t2 (attention)
  // goes through the packed broadcast, after both.
  const auto p = pipeline_moe();
  const auto c = two_nodes();
  const auto plan = make_plan("m2n-ring", p, c).value();
  const auto s = deploy(deployment_info(DeploymentId::kNemoRl), plan, p, c).value();
  ASSERT_TRUE(s.store_and_forward);
  const auto reshards = calls_in(s, "M2N reshard");
  ASSERT_EQ(reshards.size(), 2u);
  EXPECT_EQ(reshards[0]->label, "model.layers.0.mlp.experts.gate_proj");
  EXPECT_EQ(reshards[1]->queue, 1);
  for (const Call* call : reshards) {
    // Opening and closing barriers over the stage's 2 ranks and both inference ranks, 2 per
    // domain in 2 domains: 6.8 + 2 (1 x 0.6 + log2(2) x 5) = 18.0 us.
    EXPECT_NEAR(call->finish.value, 18.0 * kUs, 1e-12);
    for (const std::int32_t t : call->transfers)
      EXPECT_EQ(plan.tensors[plan.transfers[static_cast<std::size_t>(t)].segments.front().tensor].name,
                call->label);
  }
  const auto broadcasts = calls_in(s, "packed broadcast");
  ASSERT_EQ(broadcasts.size(), 1u);
  EXPECT_EQ(broadcasts[0]->collective->bytes.value, 512);
  PlanSimulationOptions o{.calls = &s};
  EXPECT_TRUE(simulate_plan(plan, p, c, o));
}

TEST(NemoRlReshard, WithFp8AtTheReceiversEachReceiverCastsWhatLandedAndABenchmarkDoesNot) {
  // NeMo RL loads what M2N lands into vLLM through fp8.load_weights: each inference rank casts
  // the bf16 it received of an expert weight, then copies the fp8 values and scales into the
  // fused gate_up parameter (twice its bytes, as for bf16). reshard_model_bench only moves
  // bytes: no cast, no quantization charged, no quantize rate assumed.
  const auto p = experts_cast_at_receivers();
  const auto c = two_nodes();
  const auto plan = make_plan("m2n-ring", p, c).value();
  const auto deployed = [&](DeploymentId id) { return deploy(deployment_info(id), plan, p, c).value(); };
  const auto nemo = deployed(DeploymentId::kNemoRl);
  EXPECT_FALSE(nemo.quantize_landed);
  ASSERT_EQ(calls_in(nemo, "M2N reshard").size(), 2u);
  for (const Call* call : calls_in(nemo, "M2N reshard")) {
    const auto weight =
        std::ranges::find(p.tensors(), call->label, [](const TensorReshard& t) { return t.tensor.name; });
    ASSERT_NE(weight, p.tensors().end());
    ASSERT_EQ(call->quantizes.size(), call->copies_after.size());
    for (std::size_t i = 0; i < call->quantizes.size(); ++i) {
      EXPECT_GE(call->quantizes[i].rank.value, 4);  // an inference rank
      EXPECT_GT(call->quantizes[i].bytes.value, 0);
      EXPECT_EQ(call->copies_after[i].rank, call->quantizes[i].rank);
      EXPECT_EQ(call->copies_after[i].bytes, sim::cast_bytes(weight->tensor, call->quantizes[i].bytes) * 2);
    }
  }
  PlanSimulationOptions with_nemo{.calls = &nemo};
  EXPECT_GT(simulate_plan(plan, p, c, with_nemo).value().breakdown[TimeKind::kQuantize].value, 0);
  const auto bench = deployed(DeploymentId::kM2nBench);
  EXPECT_FALSE(bench.quantize_landed);
  for (const auto& call : bench.calls) EXPECT_TRUE(call.quantizes.empty());
  PlanSimulationOptions with_bench{.calls = &bench};
  const auto sim = simulate_plan(plan, p, c, with_bench).value();
  EXPECT_EQ(sim.breakdown[TimeKind::kQuantize].value, 0);
  EXPECT_TRUE(sim.assumptions.empty());
}

TEST(NemoRlReshard, ARingThroughOtherDomainsIsTheSplitKernelsInjectionThenItsRing) {
  // Every rank in a domain of its own: the inference replicas 4 and 5 are a ring, 4 injected
  // first. Each bulk parameter is two calls on its stage's queue: the injection (what the
  // sources send, ending with a barrier over the stage's 2 ranks and rank 4: 3 ranks in 3
  // domains), then the ring (opening with a barrier over ranks 4 and 5, 2 domains), whose
  // receivers unpack.
  const auto p = pipeline_moe();
  const auto c = testing::make_test_cluster(6, 1, 4, 2);
  const auto plan = make_plan("m2n-ring", p, c).value();
  const auto s = deploy(deployment_info(DeploymentId::kNemoRl), plan, p, c).value();
  EXPECT_TRUE(s.pairs_in_order);
  const auto reshards = calls_in(s, "M2N reshard");
  ASSERT_EQ(reshards.size(), 4u);
  for (std::size_t k = 0; k < 2; ++k) {
    const Call& injection = *reshards[2 * k];
    const Call& ring = *reshards[2 * k + 1];
    EXPECT_EQ(injection.label, p.tensors()[k].tensor.name + " (injection)");
    EXPECT_EQ(ring.label, p.tensors()[k].tensor.name + " (ring)");
    EXPECT_EQ(ring.queue, injection.queue);
    EXPECT_EQ(injection.finish, barrier_latency(NcclLatencies{}, {.ranks = 3, .domains = 3}));
    EXPECT_EQ(ring.launch, barrier_latency(NcclLatencies{}, {.ranks = 2, .domains = 2}));
    for (const std::int32_t t : injection.transfers)
      EXPECT_TRUE(plan.transfers[static_cast<std::size_t>(t)].upstream().empty());
    for (const std::int32_t t : ring.transfers)
      EXPECT_FALSE(plan.transfers[static_cast<std::size_t>(t)].upstream().empty());
    EXPECT_FALSE(injection.copies_before.empty());
    EXPECT_TRUE(injection.copies_after.empty());
    EXPECT_EQ(ring.copies_after.size(), 2u);
  }
  PlanSimulationOptions o{.calls = &s};
  EXPECT_TRUE(simulate_plan(plan, p, c, o));
}

TEST(M2nBench, OneRepresentativePerPatternAndStagePatternsInTurn) {
  // Patterns: layers.X.mlp.experts.gate_proj (stages 0 and 1, in parallel), then
  // layers.X.self_attn.q_proj.weight (stage 0), after both.
  const auto p = pipeline_moe();
  const auto c = two_nodes();
  const auto plan = make_plan("m2n-ring", p, c).value();
  const auto s = deploy(deployment_info(DeploymentId::kM2nBench), plan, p, c).value();
  ASSERT_EQ(s.calls.size(), 3u);
  EXPECT_TRUE(s.calls[0].after.empty());
  EXPECT_EQ(s.calls[1].queue, 1);
  EXPECT_EQ(s.calls[2].after, (std::vector<std::int32_t>{0, 1}));
}

TEST(M2nBench, WithoutDeduplicationEveryLayerIsTimedEachStagesInTurn) {
  // Layers 0 and 2 on stage 0, layer 1 on stage 1, one pattern. De-duplicated: layer 0 (queue 0)
  // and layer 1 (queue 1). --no-dedup: layers 0 and 2 one after another on queue 0, layer 1 on
  // queue 1 beside them.
  const Shape experts{4, 8, 16};
  const auto stacked = [&](std::string name, std::int32_t first) {
    return testing::make_reshard(std::move(name), experts,
                                 make_layout(experts, {2}, rank_range(first, 2), "S0"),
                                 make_layout(experts, {2}, rank_range(4, 2), "R"));
  };
  const auto p = ReshardProblem::make({stacked("model.layers.0.mlp.experts.gate_proj", 0),
                                       stacked("model.layers.1.mlp.experts.gate_proj", 2),
                                       stacked("model.layers.2.mlp.experts.gate_proj", 0)},
                                      4, 2)
                     .value();
  const auto c = two_nodes();
  const auto plan = make_plan("m2n-ring", p, c).value();
  const auto labels = [&](DeploymentId id) {
    std::vector<std::pair<std::string, std::int32_t>> out;
    const auto schedule = deploy(deployment_info(id), plan, p, c).value();
    for (const auto& call : schedule.calls) out.emplace_back(call.label, call.queue);
    return out;
  };
  using Calls = std::vector<std::pair<std::string, std::int32_t>>;
  EXPECT_EQ(labels(DeploymentId::kM2nBench), (Calls{{"model.layers.0.mlp.experts.gate_proj", 0},
                                                    {"model.layers.1.mlp.experts.gate_proj", 1}}));
  EXPECT_EQ(labels(DeploymentId::kM2nBenchAll), (Calls{{"model.layers.0.mlp.experts.gate_proj", 0},
                                                       {"model.layers.2.mlp.experts.gate_proj", 0},
                                                       {"model.layers.1.mlp.experts.gate_proj", 1}}));
}

TEST(M2nBench, NamesAreGroupedByPatternInOnePassWhateverTheirLength) {
  // A name with 100k digits after 'layers.' overflowed the stack in std::regex's matcher. Now, on
  // stage 0 (ranks 0, 1), layer <100k digits> and layer 5 are one pattern, timed once by its
  // first; 'layers.7b.' has no layer number and stays apart; stage 1 (ranks 2, 3) holds layer 9.
  const Shape s{8, 8};
  const std::string digits(100000, '7');
  const auto tensor = [&](std::string name, std::int32_t first) {
    return testing::make_reshard(std::move(name), s, make_layout(s, {2}, rank_range(first, 2), "S0"),
                                 make_layout(s, {2}, rank_range(4, 2), "R"));
  };
  const auto p =
      ReshardProblem::make({tensor("model.layers." + digits + ".w", 0), tensor("model.layers.5.w", 0),
                            tensor("model.layers.9.w", 2), tensor("model.layers.7b.w", 0)},
                           4, 2)
          .value();
  const auto c = two_nodes();
  const auto plan = make_plan("m2n-ring", p, c).value();
  const auto schedule = deploy(deployment_info(DeploymentId::kM2nBench), plan, p, c).value();
  std::vector<std::string> labels;
  for (const auto& call : schedule.calls) labels.push_back(call.label);
  EXPECT_EQ(labels, (std::vector<std::string>{"model.layers." + digits + ".w", "model.layers.9.w",
                                              "model.layers.7b.w"}));
}

TEST(NemoRlRayDispatch, OneDriverSubmitsACallPerWorkerThenWaitsOneRoundTrip) {
  // W = 256 workers: 0.5 ms + 256 x 0.12 ms = 31.22 ms.
  EXPECT_NEAR(sim::ray_dispatch_time({}, 256).value, 31.22e-3, 1e-12);
  // The driver calls every training rank and one vLLM worker per TP group: q_proj split two ways
  // over 2 x 2 inference ranks is 2 TP groups; a routed expert split 4 ways does not count.
  const Shape q{16, 16}, experts{4, 8, 16};
  const auto tp2 =
      ReshardProblem::make({testing::make_reshard("model.layers.0.self_attn.q_proj.weight", q,
                                                  make_layout(q, {4}, rank_range(0, 4), "S0"),
                                                  make_layout(q, {2, 2}, rank_range(4, 4), "R,S0")),
                            testing::make_reshard("model.layers.0.mlp.experts.gate_proj", experts,
                                                  make_layout(experts, {4}, rank_range(0, 4), "S0"),
                                                  make_layout(experts, {4}, rank_range(4, 4), "S0"))},
                           4, 4)
          .value();
  EXPECT_EQ(sim::ray_actors(tp2), 4 + 2);
}

TEST(NemoRlRayDispatch, EveryCallWaitsForTheFanOutSoThePredictionGrowsByIt) {
  // pipeline_moe: 4 training ranks and 2 replicated inference ranks (TP 1): W = 6, so the fan-out
  // takes 0.5 ms + 6 x 0.12 ms = 1.22 ms, first and on its own queue, every other queue's first
  // call after it; each path's prediction is 1.22 ms longer than without Ray.
  const auto p = pipeline_moe();
  const auto c = two_nodes();
  const auto& nemo = deployment_info(DeploymentId::kNemoRl);
  const DeploymentConstants no_ray{.ray_round_trip = Seconds{0}, .ray_async_call = Seconds{0}};
  for (const char* strategy : {"gather-broadcast", "m2n-ring"}) {
    const auto plan = make_plan(strategy, p, c).value();
    const auto s = deploy(nemo, plan, p, c).value();
    ASSERT_FALSE(s.calls.empty());
    EXPECT_EQ(s.calls[0].group, "Ray dispatch");
    EXPECT_NEAR(s.calls[0].launch.value, 1.22e-3, 1e-12);
    std::vector<std::int32_t> queues;
    for (std::size_t i = 1; i < s.calls.size(); ++i) {
      EXPECT_NE(s.calls[i].queue, s.calls[0].queue);
      if (std::ranges::find(queues, s.calls[i].queue) != queues.end()) continue;
      queues.push_back(s.calls[i].queue);
      EXPECT_EQ(s.calls[i].after.front(), 0) << s.calls[i].label;
    }
    const auto without = deploy(nemo, plan, p, c, no_ray).value();
    PlanSimulationOptions with_o{.calls = &s, .rate_tolerance = 0},
        without_o{.calls = &without, .rate_tolerance = 0};
    const auto with_ray = simulate_plan(plan, p, c, with_o).value();
    EXPECT_NEAR(with_ray.predicted.value - simulate_plan(plan, p, c, without_o).value().predicted.value,
                1.22e-3, 1e-9)
        << strategy;
    ASSERT_FALSE(with_ray.contributors.empty());
    EXPECT_NE(std::ranges::find(with_ray.contributors, std::string("fixed cost of Ray dispatch calls"),
                                &Contributor::what),
              with_ray.contributors.end());
  }
  // refit's executors and reshard_model_bench run without Ray.
  const auto plan = make_plan("m2n-ring", p, c).value();
  for (const auto id : {DeploymentId::kRefit, DeploymentId::kM2nBench, DeploymentId::kM2nBenchAll}) {
    const auto schedule = deploy(deployment_info(id), plan, p, c).value();
    for (const auto& call : schedule.calls) EXPECT_NE(call.group, "Ray dispatch");
  }
}

TEST(RefitDeployment, PredictsWhatThePlanAlonePredicts) {
  const auto p = pipeline_moe();
  const auto c = two_nodes();
  const auto plan = make_plan("refit", p, c).value();
  const auto s = deploy(deployment_info(DeploymentId::kRefit), plan, p, c).value();
  ASSERT_EQ(s.calls.size(), 1u);
  PlanSimulationOptions with{.calls = &s, .rate_tolerance = 0}, without{.rate_tolerance = 0};
  EXPECT_NEAR(simulate_plan(plan, p, c, with).value().predicted.value,
              simulate_plan(plan, p, c, without).value().predicted.value, 1e-12);
}

TEST(RefitDeployment, RunsACollectivesPlanAsTheUcxExecutorRunsIt) {
  // refit run --strategy m2n-ring moves the ring's transfers through the UCX executor (16 chunks
  // granted ahead, direct stores, pairs paced by their bytes), not as NCCL's collectives would: the
  // plan labelled nccl-collectives predicts exactly what the same transfers labelled refit-ucx do.
  // NeMo RL runs it as labelled.
  const auto p = pipeline_moe();
  const auto c = two_nodes();
  const auto ring = make_plan("m2n-ring", p, c).value();
  ASSERT_EQ(ring.execution, ExecutionModelId::kNcclCollectives);
  Plan relabelled = ring;
  relabelled.execution = ExecutionModelId::kRefitUcx;
  const auto& refit = deployment_info(DeploymentId::kRefit);
  const auto as_labelled = deploy(refit, ring, p, c).value(),
             as_ucx = deploy(refit, relabelled, p, c).value();
  ASSERT_NE(as_labelled.execution, nullptr);
  EXPECT_EQ(as_labelled.execution->id, ExecutionModelId::kRefitUcx);
  EXPECT_TRUE(as_labelled.pairs_share_by_bytes);
  const PlanSimulationOptions labelled{.calls = &as_labelled, .rate_tolerance = 0},
      ucx{.calls = &as_ucx, .rate_tolerance = 0};
  EXPECT_EQ(execution_of(ring, labelled).pair_window, 16);
  EXPECT_DOUBLE_EQ(simulate_plan(ring, p, c, labelled).value().predicted.value,
                   simulate_plan(relabelled, p, c, ucx).value().predicted.value);
  EXPECT_EQ(deploy(deployment_info(DeploymentId::kNemoRl), ring, p, c).value().execution, nullptr);
}

TEST(RefitNcclDeployment, RunsAnyPlanAsThePlanLabelledRefitNcclRuns) {
  // refit run --executor nccl: whatever a plan's label, its transfers go step by step, as the same
  // transfers labelled refit-nccl do under refit's executors. Each rank's step costs it the NCCL
  // executor's time, here 50 us and 20 us per send or receive: the plan takes longer than on the
  // same GPUs charging nothing (two_nodes()'s NcclCosts{}).
  const auto p = pipeline_moe();
  const auto free = two_nodes();
  ClusterSpec spec = free.cluster().spec();
  for (auto& g : spec.gpus) g.nccl_costs = NcclCosts{.per_op = Seconds{20e-6}, .per_step = Seconds{50e-6}};
  const auto c = PlacedCluster::make(Cluster::make(std::move(spec)).value(), free.ranks()).value();
  const auto& nccl = deployment_info(DeploymentId::kRefitNccl);
  for (const char* strategy : {"refit", "m2n-ring"}) {
    SCOPED_TRACE(strategy);
    const auto plan = make_plan(strategy, p, c).value();
    Plan relabelled = plan;
    relabelled.execution = ExecutionModelId::kRefitNccl;
    const auto as_nccl = deploy(nccl, plan, p, c).value();
    ASSERT_EQ(as_nccl.calls.size(), 1u);
    ASSERT_NE(as_nccl.execution, nullptr);
    EXPECT_EQ(as_nccl.execution->id, ExecutionModelId::kRefitNccl);
    const auto as_labelled = deploy(refit_executors(), relabelled, p, c).value();
    const PlanSimulationOptions o{.calls = &as_nccl, .rate_tolerance = 0},
        labelled{.calls = &as_labelled, .rate_tolerance = 0};
    const double stepped = simulate_plan(plan, p, c, o).value().predicted.value;
    EXPECT_DOUBLE_EQ(stepped, simulate_plan(relabelled, p, c, labelled).value().predicted.value);
    EXPECT_GT(stepped, simulate_plan(plan, p, free, o).value().predicted.value + 70e-6 - 1e-12);
  }
  EXPECT_FALSE(nccl.no_delta.empty());
  EXPECT_TRUE(refit_executors().no_delta.empty());
  // Its costs are launches: the "kernel launch" knob moves them, 20 % down faster, 20 % up slower.
  const auto plan = make_plan("refit", p, c).value();
  const auto as_nccl = deploy(nccl, plan, p, c).value();
  const double base =
      simulate_plan(plan, p, c, {.calls = &as_nccl, .rate_tolerance = 0}).value().predicted.value;
  const auto moves = sensitivity(plan, p, c, nccl, {.rate_tolerance = 0}).value();
  const auto launch = std::ranges::find(moves, std::string("kernel launch"), &Sensitivity::constant);
  ASSERT_NE(launch, moves.end());
  EXPECT_LT(launch->lower.value, base);
  EXPECT_GT(launch->higher.value, base);
}

TEST(Sensitivity, EachConstantMovesThePredictionTheWayItShould) {
  // Slower NICs cannot make a refit faster, faster ones cannot make it slower; a step outside
  // (0, 1) is refused.
  const auto p = pipeline_moe();
  const auto c = two_nodes();
  const auto plan = make_plan("gather-broadcast", p, c).value();
  const auto& nemo = deployment_info(DeploymentId::kNemoRl);
  const auto s = deploy(nemo, plan, p, c).value();
  PlanSimulationOptions o{.calls = &s, .rate_tolerance = 0};
  const double base = simulate_plan(plan, p, c, o).value().predicted.value;
  const auto moves = sensitivity(plan, p, c, nemo, {.rate_tolerance = 0}).value();
  ASSERT_EQ(moves.size(), 11u);
  const auto nic = std::ranges::find(moves, std::string("NIC bandwidth"), &Sensitivity::constant);
  ASSERT_NE(nic, moves.end());
  EXPECT_GE(nic->lower.value, base);
  EXPECT_LE(nic->higher.value, base);
  // The Ray fan-out (1.22 ms here) is on the critical path: 20 % of it either way.
  const auto ray = std::ranges::find(moves, std::string("Ray dispatch"), &Sensitivity::constant);
  ASSERT_NE(ray, moves.end());
  EXPECT_NEAR(ray->lower.value, base - 0.2 * 1.22e-3, 1e-9);
  EXPECT_NEAR(ray->higher.value, base + 0.2 * 1.22e-3, 1e-9);
  EXPECT_FALSE(sensitivity(plan, p, c, nemo, {}, 1.5));
}

}  // namespace
}  // namespace refit
