// The NCCL executor on a real GPU (skipped where there is none, as in CI). All ranks of a plan
// run in this one process on one GPU over a communicator of size 1, every send and receive being
// NCCL's send to self inside the step's group, and every destination is checked element by
// element. The copy kernel is checked against its host run, and a rank that never joins must
// cost a timeout, not a hang. Weights quantized at the senders go through the quantize kernel.
#include <algorithm>
#include <random>

#include <gtest/gtest.h>
#include <nccl.h>

#include "copy_kernel.h"
#include "device_copy.h"
#include "error_code.h"
#include "gpu_support.h"
#include "landing_problem.h"
#include "quantized_problems.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/membership.h"
#include "refit/executors/nccl/nccl_executor.h"
#include "refit/lowering/arrays.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::gpu_testing {
namespace {

using refit::testing::make_layout;
using refit::testing::make_reshard;
using refit::testing::rank_range;

// About 30 MB over 4 + 4 ranks: strided unpacks, replicated destinations (relays), 3-d and 4-d
// boxes, uneven shards, 1-, 2-, 4- and 8-byte elements.
ReshardProblem gpu_problem() {
  return ReshardProblem::make(
             {make_reshard("w1", {2048, 1024}, make_layout({2048, 1024}, {4}, rank_range(0, 4), "S0"),
                           make_layout({2048, 1024}, {4}, rank_range(4, 4), "S1")),
              make_reshard("w2", {1024, 4096}, make_layout({1024, 4096}, {4}, rank_range(0, 4), "S1"),
                           make_layout({1024, 4096}, {2, 2}, rank_range(4, 4), "S0,R"), DType::kFP32),
              make_reshard("e", {8, 512, 256}, make_layout({8, 512, 256}, {2, 2}, rank_range(0, 4), "S0,S2"),
                           make_layout({8, 512, 256}, {4}, rank_range(4, 4), "S1")),
              make_reshard("b", {4099}, make_layout({4099}, {4}, rank_range(0, 4), "R"),
                           make_layout({4099}, {4}, rank_range(4, 4), "S0"), DType::kInt8),
              make_reshard("x", {3, 5, 7, 9}, make_layout({3, 5, 7, 9}, {4}, rank_range(0, 4), "S3"),
                           make_layout({3, 5, 7, 9}, {4}, rank_range(4, 4), "S1"), DType::kFP64)},
             4, 4)
      .value();
}

std::vector<LocalRankBuffers> all_of(const DeviceRanks& d) { return d.ranks; }

class OneGpu : public ::testing::TestWithParam<std::string_view> {};

TEST_P(OneGpu, EveryRankOfAPlanOnOneGpuGetsExactlyItsBytes) {
  REFIT_REQUIRE_GPU();
  const auto problem = gpu_problem();
  const auto cluster = refit::testing::make_test_cluster(2, 4, 4, 4);
  const CommRankMap all_on_one(static_cast<std::size_t>(problem.world_size()), 0);
  LoneBootstrap bootstrap;
  for (const auto& [chunk, staging] :
       {std::pair{Bytes{8 << 20}, Bytes{256 << 20}}, std::pair{Bytes{256 << 10}, Bytes{1 << 20}}}) {
    SCOPED_TRACE(::testing::Message() << "chunk " << chunk.value << ", staging " << staging.value);
    auto plan = make_plan(GetParam(), problem, cluster,
                          PlanOptions{.chunk = chunk, .broadcast_buffer = Bytes{1 << 30}});
    ASSERT_TRUE(plan) << plan.error().message;
    auto executor = NcclExecutor::create(
        bootstrap, ExecutorOptions{.timeout = Seconds{60.0}, .staging = staging, .on_chunk_sent = {}},
        NcclSetup{.device = 0, .comm_rank_of = all_on_one});
    ASSERT_TRUE(executor) << executor.error().message;
    const auto ranks = make_device_ranks(problem);
    const auto buffers = all_of(ranks);
    auto prepared = (*executor)->prepare_ranks(*plan, buffers);
    ASSERT_TRUE(prepared) << prepared.error().message;
    for (int round = 0; round < 2; ++round) {  // a prepared plan runs again (the next refit step)
      clear_destinations(ranks);
      auto report = (*executor)->execute(**prepared);
      ASSERT_TRUE(report) << report.error().message;
      std::int64_t plan_bytes = 0;
      for (const auto& t : plan->transfers) plan_bytes += t.bytes.value;
      EXPECT_EQ(report->bytes_sent.value, plan_bytes);
      EXPECT_EQ(report->bytes_received.value, plan_bytes);
      auto ok = verify_device_destinations(problem, ranks);
      EXPECT_TRUE(ok) << ok.error().message;
      std::printf("[ %s ] %s, chunk %lld: %.3f ms for %lld bytes\n", round ? "rerun" : "first",
                  plan->strategy.c_str(), static_cast<long long>(chunk.value), report->elapsed.value * 1e3,
                  static_cast<long long>(plan_bytes));
    }
  }
}

// A step over a membership (set_membership) on one GPU: the 4 inference ranks as 2 engines of 2,
// engine 1 (plan ranks 6, 7) no member. Engine 0's ranks get exactly their bytes (what came
// through engine 1 in the full plan is re-fed from the training ranks), engine 1's stay zero, the
// report names engine 0 completed; the membership's program runs again unchanged.
TEST(OneGpuElastic, AStepOverAMembershipFillsItsMembersOnly) {
  REFIT_REQUIRE_GPU();
  const auto problem = gpu_problem();
  const auto plan = make_plan("refit", problem, refit::testing::make_test_cluster(2, 4, 4, 4),
                              PlanOptions{.chunk = Bytes{256 << 10}})
                        .value();
  LoneBootstrap bootstrap;
  auto executor = NcclExecutor::create(bootstrap, ExecutorOptions{.timeout = Seconds{60.0}},
                                       NcclSetup{.device = 0, .comm_rank_of = CommRankMap(8, 0)});
  ASSERT_TRUE(executor) << executor.error().message;
  const auto ranks = make_device_ranks(problem);
  auto prepared = (*executor)->prepare_ranks(plan, all_of(ranks));
  ASSERT_TRUE(prepared) << prepared.error().message;
  auto m = consecutive_engines(4, 4, 2, 2).value();
  m.members[1] = false;
  ASSERT_TRUE((*executor)->set_membership(m));
  const std::vector<bool> filled{true, true, true, true, true, true, false, false};
  for (int round = 0; round < 2; ++round) {
    clear_destinations(ranks);
    auto report = (*executor)->execute(**prepared);
    ASSERT_TRUE(report) << report.error().message;
    ASSERT_TRUE(report->engines);
    EXPECT_EQ(report->engines->completed, std::vector<std::int32_t>{0});
    EXPECT_TRUE(report->engines->missed.empty());
    auto ok = verify_device_destinations(problem, ranks, filled);
    EXPECT_TRUE(ok) << ok.error().message;
  }
}

INSTANTIATE_TEST_SUITE_P(Nccl, OneGpu, ::testing::ValuesIn(strategy_names()), [](const auto& info) {
  std::string name(info.param);
  std::ranges::replace(name, '-', '_');
  return name;
});

TEST(OneGpuAdopted, RunsOnTheCallersCommunicator) {
  REFIT_REQUIRE_GPU();
  ncclComm_t comm = nullptr;
  int device = 0;
  ASSERT_EQ(ncclCommInitAll(&comm, 1, &device), ncclSuccess);
  const auto problem = gpu_problem();
  const auto plan = make_plan("refit", problem, refit::testing::make_test_cluster(2, 4, 4, 4)).value();
  {
    auto executor = NcclExecutor::adopt(comm, ExecutorOptions{}, CommRankMap(8, 0));
    ASSERT_TRUE(executor) << executor.error().message;
    const auto ranks = make_device_ranks(problem);
    auto prepared = (*executor)->prepare_ranks(plan, all_of(ranks));
    ASSERT_TRUE(prepared) << prepared.error().message;
    auto report = (*executor)->execute(**prepared);
    ASSERT_TRUE(report) << report.error().message;
    auto ok = verify_device_destinations(problem, ranks);
    EXPECT_TRUE(ok) << ok.error().message;
  }
  EXPECT_EQ(ncclCommDestroy(comm), ncclSuccess);  // adopted: still the caller's to destroy
}

// Runs `plan` over host shards, as `refit run` holds them, every plan rank in this one process,
// and verifies every destination.
void run_on_host_shards(const ReshardProblem& problem, const Plan& plan) {
  std::vector<HostShards> shards;
  std::vector<LocalRankBuffers> buffers;
  for (std::int32_t r = 0; r < problem.world_size(); ++r)
    shards.push_back(HostShards::allocate(problem, Rank{r}));
  for (std::int32_t r = 0; r < problem.world_size(); ++r)
    buffers.push_back({.rank = Rank{r}, .buffers = shards[static_cast<std::size_t>(r)].buffers()});
  LoneBootstrap bootstrap;
  auto executor = NcclExecutor::create(
      bootstrap, ExecutorOptions{},
      NcclSetup{.device = 0, .comm_rank_of = CommRankMap(static_cast<std::size_t>(problem.world_size()), 0)});
  ASSERT_TRUE(executor) << executor.error().message;
  auto prepared = (*executor)->prepare_ranks(plan, buffers);
  ASSERT_TRUE(prepared) << prepared.error().message;
  auto report = (*executor)->execute(**prepared);
  ASSERT_TRUE(report) << report.error().message;
  for (const auto& s : shards) {
    auto ok = s.verify(problem);
    EXPECT_TRUE(ok) << ok.error().message;
  }
}

// Host shards are mirrored on the GPU around each execution.
TEST(OneGpuHostMemory, HostShardsAreMirroredOnTheGpu) {
  REFIT_REQUIRE_GPU();
  const auto problem = gpu_problem();
  run_on_host_shards(problem,
                     make_plan("m2n-ring", problem, refit::testing::make_test_cluster(2, 4, 4, 4)).value());
}

// FP8 in flight: the training ranks' bf16 boxes are quantized by the kernel on the GPU and every
// inference rank's fp8 values and scales are what the CPU quantizer makes, for both schemes.
TEST(OneGpuFp8, WeightsQuantizedAtTheSendersArriveAsTheQuantizerMakesThem) {
  REFIT_REQUIRE_GPU();
  for (const auto scheme : all_quant_schemes()) {
    SCOPED_TRACE(quant_scheme_name(scheme));
    const auto problem = refit::testing::quantized_test_problem(scheme);
    run_on_host_shards(problem,
                       make_plan("refit", problem, refit::testing::make_test_cluster(3, 2, 2, 4)).value());
  }
}

// FP8 at the landing ranks: the landing engine's ranks quantize their bf16 copies with the kernel
// on the GPU, in the step after the copies land, and send fp8 on to the other engine.
TEST(OneGpuFp8, WeightsQuantizedAtTheLandingRanksArriveAsTheQuantizerMakesThem) {
  REFIT_REQUIRE_GPU();
  const auto problem = refit::testing::landing_test_problem(2, 2);
  run_on_host_shards(problem,
                     make_plan("refit", problem, refit::testing::make_test_cluster(3, 2, 2, 4)).value());
}

TEST(OneGpuFailures, ARankThatNeverJoinsCostsATimeoutNotAHang) {
  REFIT_REQUIRE_GPU();
  LoneBootstrap bootstrap(2);  // rank 1 never calls ncclCommInitRank
  const auto start = std::chrono::steady_clock::now();
  auto executor = NcclExecutor::create(
      bootstrap, ExecutorOptions{.timeout = Seconds{2.0}, .staging = Bytes{1 << 20}, .on_chunk_sent = {}},
      NcclSetup{.device = 0, .comm_rank_of = {}});
  ASSERT_FALSE(executor);
  EXPECT_EQ(executor.error().code, ErrorCode::kTimeout);
  EXPECT_NE(executor.error().message.find("ncclCommInitRankConfig(rank 0 of 2"), std::string::npos)
      << executor.error().message;
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(30));
}

TEST(OneGpuFailures, RefusesHostMemoryAndForeignRanks) {
  REFIT_REQUIRE_GPU();
  const auto problem = gpu_problem();
  const auto plan = make_plan("direct", problem, refit::testing::make_test_cluster(2, 4, 4, 4)).value();
  LoneBootstrap bootstrap;
  auto executor = NcclExecutor::create(bootstrap, ExecutorOptions{},
                                       NcclSetup{.device = 0, .comm_rank_of = CommRankMap(8, 0)});
  ASSERT_TRUE(executor) << executor.error().message;
  auto ranks = make_device_ranks(problem);
  auto buffers = all_of(ranks);
  std::vector<std::byte> host(buffers[0].buffers.sources[0].bytes.size());
  buffers[0].buffers.sources[0].bytes = host;
  auto prepared = (*executor)->prepare_ranks(plan, buffers);
  ASSERT_FALSE(prepared);
  EXPECT_EQ(prepared.error().code, ErrorCode::kMismatch);
  EXPECT_NE(prepared.error().message.find("rank 0, sources[0]: the buffer is not CUDA memory of GPU 0"),
            std::string::npos)
      << prepared.error().message;
}

// The kernel on the GPU against the same batch run on the host, on random strided boxes.
TEST(GpuCopyKernel, MatchesItsHostRun) {
  REFIT_REQUIRE_GPU();
  using namespace nccl_detail;
  std::mt19937_64 rng(11);
  const auto uniform = [&](std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng);
  };
  for (int round = 0; round < 50; ++round) {
    const std::int64_t bytes = 1 << 22;
    std::vector<std::byte> src(bytes), want(bytes, std::byte{0}), got(bytes);
    for (std::size_t k = 0; k < src.size(); ++k) src[k] = static_cast<std::byte>(k * 131 + round);
    DeviceMemory dsrc, ddst, ddesc;
    ASSERT_TRUE(dsrc.allocate(bytes, "src") && ddst.allocate(bytes, "dst"));
    cudaMemcpy(dsrc.get(), src.data(), bytes, cudaMemcpyHostToDevice);
    cudaMemset(ddst.get(), 0, bytes);
    std::vector<DeviceCopy> host_batch, device_batch;
    std::int64_t dst_at = 0;
    for (int k = 0; k < 8; ++k) {  // copies of several shapes and widths, disjoint destinations
      const auto es = std::int64_t{1} << uniform(0, 3);
      const auto dims = static_cast<std::size_t>(uniform(1, 4));
      Box array{Shape(dims, 0), Shape(dims, 1)};
      for (auto& e : array.extent) e = uniform(1, dims == 1 ? 60000 : 40);
      Box x = array;
      for (std::size_t d = 0; d < dims; ++d) {
        x.extent[d] = uniform(1, array.extent[d]);
        x.offset[d] = uniform(0, array.extent[d] - x.extent[d]);
      }
      if (array.volume() * es > bytes || dst_at + x.volume() * es > bytes) continue;
      const auto first = uniform(0, x.volume() - 1);
      const auto count = uniform(1, x.volume() - first);
      const auto p = plan_copy(lowering::Array{.offset = 0, .box = &array},
                               lowering::Array{.offset = dst_at, .box = &x}, x, first, count, es);
      host_batch.push_back(
          make_device_copy(p.geometry, src.data() + p.src_offset, want.data() + p.dst_offset));
      device_batch.push_back(
          make_device_copy(p.geometry, dsrc.get() + p.src_offset, ddst.get() + p.dst_offset));
      dst_at += (x.volume() * es + 15) / 16 * 16;
    }
    number_items(host_batch);
    run_batch_on_host(host_batch);
    const auto items = number_items(device_batch);
    ASSERT_TRUE(ddesc.allocate(device_batch.size() * sizeof(DeviceCopy), "descriptors"));
    cudaMemcpy(ddesc.get(), device_batch.data(), device_batch.size() * sizeof(DeviceCopy),
               cudaMemcpyHostToDevice);
    ASSERT_EQ(launch_copy_batch(reinterpret_cast<const DeviceCopy*>(ddesc.get()),
                                static_cast<std::int32_t>(device_batch.size()), items, nullptr),
              cudaSuccess);
    ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
    cudaMemcpy(got.data(), ddst.get(), bytes, cudaMemcpyDeviceToHost);
    ASSERT_EQ(got, want) << "round " << round;
  }
}

}  // namespace
}  // namespace refit::gpu_testing
