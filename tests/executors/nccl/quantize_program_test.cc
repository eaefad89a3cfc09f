// FP8 in flight through the NCCL executor's program, run on CPUs: training ranks hand over bf16
// weights, each process quantizes the boxes it sends from with the quantize kernel's own code
// (quantize_kernel_body.h) into the executor's memory before its first step, and every inference
// rank must end with exactly what the CPU quantizer makes of its box (HostShards::verify
// quantizes the bf16 pattern itself and compares every fp8 byte and every scale).
#include <algorithm>
#include <functional>

#include <gtest/gtest.h>

#include "landing_problem.h"
#include "nccl_fixture.h"
#include "program_bounds.h"
#include "program_sim.h"
#include "quantized_problems.h"
#include "quantized_sources.h"
#include "refit/executors/host_shards.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"

namespace refit::nccl_detail::testing {
namespace {

using refit::testing::quantized_test_problem;

// Three nodes of two GPUs: training ranks 0-1 on one, inference ranks 2-5 on the others.
Plan plan_of(const ReshardProblem& problem, std::string_view strategy) {
  const auto cluster = refit::testing::make_test_cluster(3, 2, 2, 4);
  return make_plan(strategy, problem, cluster, PlanOptions{.chunk = Bytes{4096}}).value();
}

struct SimRun {
  std::vector<HostShards> shards;  // by plan rank
  Processes processes;
};

// `tweak` may change a rank's buffers before the processes are made from them.
SimRun prepare(const ReshardProblem& problem, const Plan& plan, Mapping mapping, Bytes staging,
               const std::function<void(std::int32_t, RankBuffers&)>& tweak = {}) {
  SimRun run;
  HostRanks ranks;
  for (std::int32_t r = 0; r < problem.world_size(); ++r) {
    run.shards.push_back(HostShards::allocate(problem, Rank{r}));
    auto buffers = run.shards.back().buffers();
    if (tweak) tweak(r, buffers);
    ranks.ranks.push_back(LocalRankBuffers{.rank = Rank{r}, .buffers = std::move(buffers)});
  }
  auto processes = make_processes(plan, ranks, comm_map(mapping, plan.world_size()), staging);
  EXPECT_TRUE(processes) << processes.error().message;
  if (processes) run.processes = std::move(*processes);
  return run;
}

// Every mapping of plan ranks onto processes and both stream orders end with every inference
// rank (2 on) holding what the CPU quantizer makes of the training ranks' bf16.
void expect_every_mapping_delivers(const ReshardProblem& problem, const Plan& plan) {
  for (const auto mapping : {Mapping::kOnePerProcess, Mapping::kPairs, Mapping::kAllInOne})
    for (const auto policy : {SimPolicy::kCopyFirst, SimPolicy::kCommFirst}) {
      SCOPED_TRACE(::testing::Message()
                   << "mapping " << static_cast<int>(mapping) << ", policy " << static_cast<int>(policy));
      auto run = prepare(problem, plan, mapping, Bytes{2048});
      const auto ran = simulate(run.processes.sim(), policy);
      ASSERT_TRUE(ran) << ran.error().message;
      for (std::size_t r = 2; r < run.shards.size(); ++r) {
        const auto ok = run.shards[r].verify(problem);
        EXPECT_TRUE(ok) << "rank " << r << ": " << ok.error().message;
      }
    }
}

std::vector<const Quantize*> quantize_ops(const Program& p) {
  std::vector<const Quantize*> out;
  for (const auto& op : p.ops)
    if (const auto* q = std::get_if<Quantize>(&op)) out.push_back(q);
  return out;
}

TEST(NcclProgramFp8, EveryStrategyMappingAndStreamOrderDeliversWhatTheQuantizerMakes) {
  for (const auto scheme : all_quant_schemes()) {
    const auto problem = quantized_test_problem(scheme);
    for (const auto strategy : strategy_names()) {
      const auto plan = plan_of(problem, strategy);
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << strategy);
      expect_every_mapping_delivers(problem, plan);
    }
  }
}

// The op quantizing the box of `shape`, or nullptr.
const Quantize* quantizing(const std::vector<const Quantize*>& ops, const Shape& shape) {
  const auto it = std::ranges::find(ops, shape, &Quantize::shape);
  return it == ops.end() ? nullptr : *it;
}

// Where `op` lies in the program's ops.
std::ptrdiff_t position(const Program& program, const Quantize* op) {
  return std::ranges::find_if(program.ops, [&](const Op& o) { return std::get_if<Quantize>(&o) == op; }) -
         program.ops.begin();
}

TEST(NcclProgramFp8, EachTrainingRankQuantizesEachBoxOnceInTheStepThatFirstSendsIt) {
  // Training rank 0 holds rows 0..127 of w.weight ([128, 512]) and experts 0-1 ([2, 160, 96]);
  // rank 1 the rest. No other rank holds a weight in bf16, so no other process quantizes. With
  // 1 KiB chunks (2 KiB of staging) the plan takes many steps, and each rank's first chunks read
  // one of its boxes (rank 0 the experts, rank 1 w.weight), the other's first chunk going in a
  // later step: each box is quantized at the start of its own first step, so one comes before
  // the rank's first group and the other after it, while earlier steps' traffic flows. (That
  // every send sees its box quantized is checked above, in every stream order.)
  const auto problem = quantized_test_problem(QuantScheme::kFp8Block128);
  const auto run = prepare(problem, plan_of(problem, "refit"), Mapping::kOnePerProcess, Bytes{2048});
  for (std::size_t c = 0; c < run.processes.programs.size(); ++c) {
    const auto& program = run.processes.programs[c];
    const auto ops = quantize_ops(program);
    if (c >= 2) {
      EXPECT_TRUE(ops.empty()) << "process " << c;
      continue;
    }
    ASSERT_EQ(ops.size(), 2u) << "process " << c;
    const auto* weight = quantizing(ops, Shape{128, 512});
    const auto* experts = quantizing(ops, Shape{2, 160, 96});
    ASSERT_TRUE(weight && experts) << "process " << c;
    EXPECT_EQ(weight->strides, (Shape{512, 1}));
    const auto first_group =
        std::ranges::find_if(program.ops,
                             [](const Op& op) { return std::holds_alternative<GroupStart>(op); }) -
        program.ops.begin();
    const auto a = position(program, experts);
    const auto b = position(program, weight);
    const auto early = std::min(a, b);
    const auto late = std::max(a, b);
    EXPECT_LT(early, first_group) << "process " << c;
    EXPECT_GT(late, first_group) << "process " << c;
  }
}

TEST(NcclProgramFp8, ABf16ElementChangedAtTheSourceShowsOnlyAtItsBlocksDestinations) {
  // Rank 0's first element of w.weight changes sign after it is filled: the first block's fp8
  // value 0 (and its scale stays) differs at the ranks holding columns 0..255 (2 and 4), not 3, 5.
  const auto problem = quantized_test_problem(QuantScheme::kFp8Block128);
  auto run = prepare(problem, plan_of(problem, "refit"), Mapping::kOnePerProcess, Bytes{2048});
  run.shards[0].buffers().sources.front().bytes[1] ^= std::byte{0x80};
  ASSERT_TRUE(simulate(run.processes.sim(), SimPolicy::kCopyFirst));
  for (const std::size_t r : {2, 4}) {
    const auto ok = run.shards[r].verify(problem);
    ASSERT_FALSE(ok) << "rank " << r;
    EXPECT_NE(ok.error().message.find("tensor 'w.weight'"), std::string::npos) << ok.error().message;
  }
  for (const std::size_t r : {3, 5}) EXPECT_TRUE(run.shards[r].verify(problem)) << "rank " << r;
}

TEST(NcclProgramFp8, AWeightHeldInAFrameworkParameterIsQuantizedThroughItsRegion) {
  // Rank 0 holds w.weight as the right half of a [128, 1024] parameter: the kernel reads it there
  // (strides 1024, 1), and the executor's values and scales become two more source parameters.
  const auto problem = quantized_test_problem(QuantScheme::kFp8Block128);
  std::vector<std::vector<std::byte>> parameters;
  auto run = prepare(problem, plan_of(problem, "refit"), Mapping::kOnePerProcess, Bytes{2048},
                     [&](std::int32_t r, RankBuffers& b) {
                       if (r == 0) refit::testing::hold_as_parameters(problem, b, parameters);
                     });
  const auto ops = quantize_ops(run.processes.programs[0]);
  ASSERT_EQ(ops.size(), 2u);
  const auto* weight = quantizing(ops, Shape{128, 512});
  ASSERT_NE(weight, nullptr);
  EXPECT_EQ(weight->source.offset, 1024);  // 512 bf16 elements into the parameter
  EXPECT_EQ(weight->strides, (Shape{1024, 1}));
  ASSERT_TRUE(simulate(run.processes.sim(), SimPolicy::kCommFirst));
  for (std::size_t r = 2; r < run.shards.size(); ++r) {
    const auto ok = run.shards[r].verify(problem);
    EXPECT_TRUE(ok) << "rank " << r << ": " << ok.error().message;
  }
}

TEST(NcclProgramFp8, ABf16BufferShortOfItsBoxIsRefusedNamingRankAndTensor) {
  // Rank 1 hands over its fp8-sized box (half the bytes) instead of bf16.
  const auto problem = quantized_test_problem(QuantScheme::kMxfp8);
  const auto plan = plan_of(problem, "refit");
  auto shards = HostShards::allocate(problem, Rank{1});
  auto& w = shards.buffers().sources.front();
  w.bytes = w.bytes.first(w.bytes.size() / 2);
  const LocalRankBuffers one{.rank = Rank{1}, .buffers = shards.buffers()};
  const auto allocate = [](Bytes, std::string_view) -> Result<std::span<std::byte>> {
    return std::span<std::byte>{};
  };
  const auto made = QuantizedSources::make(plan, std::span(&one, 1), allocate);
  ASSERT_FALSE(made);
  EXPECT_NE(made.error().message.find("rank 1: tensor 'w.weight'"), std::string::npos)
      << made.error().message;
  EXPECT_NE(made.error().message.find("bf16"), std::string::npos) << made.error().message;
}

TEST(NcclProgramFp8, LandingRanksQuantizeOnceTheirCopyHasLandedAndSendFp8On) {
  // Engine 0 (ranks 2, 3) lands the weight: each of its processes launches the kernel once on its
  // [256, 256] box, in the step after its bf16 copy's last chunk, before any group that sends
  // fp8 from it; engine 1 (ranks 4, 5) gets fp8 only. Every strategy that sends from holders, every
  // mapping and stream order ends with every inference rank's bytes the CPU quantizer's.
  const auto problem = refit::testing::landing_test_problem(2, 2);
  for (const auto& info : strategies()) {
    if (!info.sends_from_holders) continue;
    const auto plan = plan_of(problem, info.name);
    SCOPED_TRACE(info.name);
    expect_every_mapping_delivers(problem, plan);
  }
  const auto run = prepare(problem, plan_of(problem, "refit"), Mapping::kOnePerProcess, Bytes{2048});
  for (std::size_t c = 0; c < run.processes.programs.size(); ++c) {
    const auto ops = quantize_ops(run.processes.programs[c]);
    if (c != 2 && c != 3) {
      EXPECT_TRUE(ops.empty()) << "process " << c;
      continue;
    }
    ASSERT_EQ(ops.size(), 1u) << "process " << c;
    EXPECT_EQ(ops[0]->shape, (Shape{256, 256}));
    EXPECT_EQ(ops[0]->strides, (Shape{256, 1}));
  }
}

TEST(NcclProgramFp8, BoundsCoverTheQuantizedBoxAndItsOutputs) {
  // A [128, 256] block128 box: 65,536 bf16 bytes in, 32,768 fp8 bytes and 2 fp32 scales out.
  const auto shard = [](std::int32_t i) { return Address{.kind = BufferKind::kShard, .index = i}; };
  const Program program{.ops = {Quantize{.scheme = QuantScheme::kFp8Block128,
                                         .source = shard(0),
                                         .values = shard(1),
                                         .scales = shard(2),
                                         .shape = {128, 256},
                                         .strides = {256, 1}}}};
  EXPECT_TRUE(check_bounds(program, std::vector<std::int64_t>{65536, 32768, 8}));
  for (const auto& short_one : {std::vector<std::int64_t>{65534, 32768, 8},
                                {65536, 32767, 8},
                                std::vector<std::int64_t>{65536, 32768, 4}}) {
    const auto checked = check_bounds(program, short_one);
    ASSERT_FALSE(checked);
    EXPECT_EQ(checked.error().code, ErrorCode::kInternal);
  }
}

}  // namespace
}  // namespace refit::nccl_detail::testing
