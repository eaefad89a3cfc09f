// The NCCL executor's delta step on a GPU (nccl_delta_executor.h, run on the one GPU of
// tests/gpu/run.sh): every plan rank of a delta refit runs in a thread of this process with a
// DeltaExecutor of its own whose bytes lie on the GPU (DeviceDeltaMemory over CudaDeltaKernels),
// and each round's payloads move through one NCCL executor on a communicator of size 1 running
// every plan rank (SharedNccl: the threads' prepare and execute calls meet, and one prepare_ranks
// or execute runs them all, as a process running several plan ranks does). The synthetic RL-like
// update changes the training ranks' weights step after step; after every step every inference
// rank holds exactly that step's weights (SyntheticShards::verify computes them on its own: what
// a dense refit of that step delivers), with the shards in host memory (packed on the host and
// uploaded) and in device memory (packed by the copy kernel). The GPU codec's payloads are the
// CPU codec's raw choice byte for byte, so every step sends exactly what the same refit with its
// bytes in host memory and DeltaCodec without zstd sends, payloads mirrored by the NCCL executor.
#include <barrier>
#include <cstdio>

#include <gtest/gtest.h>

#include "cuda_delta_kernels.h"
#include "delta_problem.h"
#include "device_delta_memory.h"
#include "gpu_support.h"
#include "refit/core/try.h"
#include "refit/executors/delta_executor.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/nccl/nccl_executor.h"
#include "refit/executors/synthetic_shards.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "thread_bootstrap.h"

namespace refit::gpu_testing {
namespace {

// One NCCL executor shared by the threads of every plan rank: each call waits for every rank's,
// then one call of the executor runs them all.
class SharedNccl {
 public:
  SharedNccl(NcclExecutor& nccl, std::int32_t ranks)
      : nccl_(nccl),
        plans_(static_cast<std::size_t>(ranks)),
        buffers_(static_cast<std::size_t>(ranks)),
        prepare_(ranks, Prepare{this}),
        execute_(ranks, Execute{this}) {}

  Result<void> prepare(const Plan& plan, Rank rank, const RankBuffers& buffers) {
    plans_[static_cast<std::size_t>(rank.value)] = &plan;
    buffers_[static_cast<std::size_t>(rank.value)] = LocalRankBuffers{.rank = rank, .buffers = buffers};
    prepare_.arrive_and_wait();
    if (!prepared_) return std::unexpected(prepared_.error());
    return {};
  }
  Result<ExecutionReport> execute() {
    execute_.arrive_and_wait();
    return report_;
  }

 private:
  struct Prepare {
    SharedNccl* self;
    void operator()() noexcept {
      self->prepared_ = self->nccl_.prepare_ranks(*self->plans_.front(), self->buffers_);
    }
  };
  struct Execute {
    SharedNccl* self;
    void operator()() noexcept {
      self->report_ = self->prepared_ ? self->nccl_.execute(**self->prepared_)
                                      : Result<ExecutionReport>(std::unexpected(self->prepared_.error()));
    }
  };

  NcclExecutor& nccl_;
  std::vector<const Plan*> plans_;
  std::vector<LocalRankBuffers> buffers_;
  Result<std::unique_ptr<PreparedPlan>> prepared_ = std::unique_ptr<PreparedPlan>();
  Result<ExecutionReport> report_;
  std::barrier<Prepare> prepare_;
  std::barrier<Execute> execute_;
};

// A plan rank's view of the shared executor.
class RankOfShared final : public Executor {
 public:
  explicit RankOfShared(SharedNccl& shared) : shared_(shared) {}
  std::string_view name() const override { return "nccl"; }
  ExecutorCapabilities capabilities() const override { return {.host_memory = true, .cuda_memory = true}; }
  Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                const RankBuffers& buffers) override {
    REFIT_TRY(shared_.prepare(plan, rank, buffers));
    return std::make_unique<PreparedPlan>();
  }
  Result<ExecutionReport> execute(PreparedPlan&) override { return shared_.execute(); }

 private:
  SharedNccl& shared_;
};

// A rank's shards in device memory, mirroring its host shards (which the synthetic update steps
// and verifies).
struct DeviceShards {
  std::vector<nccl_detail::DeviceMemory> memory;
  RankBuffers buffers{.memory = MemoryKind::kCuda};

  explicit DeviceShards(const RankBuffers& host) {
    const auto mirror = [&](const std::vector<ShardBuffer>& from, std::vector<ShardBuffer>& to) {
      for (const auto& s : from) {
        auto& m = memory.emplace_back();
        if (!m.allocate(s.bytes.size(), "cudaMalloc (test shard)"))
          throw std::runtime_error("cudaMalloc failed");
        to.push_back(ShardBuffer{.tensor = s.tensor, .box = s.box, .bytes = {m.get(), s.bytes.size()}});
      }
    };
    mirror(host.sources, buffers.sources);
    mirror(host.destinations, buffers.destinations);
  }
  // Sources up before a step, destinations down after it.
  void upload(const RankBuffers& host) const {
    for (std::size_t i = 0; i < host.sources.size(); ++i)
      EXPECT_TRUE(nccl_detail::upload(buffers.sources[i].bytes.data(), host.sources[i].bytes.data(),
                                      host.sources[i].bytes.size(), "source shard")
                      .has_value());
  }
  void download(const RankBuffers& host) const {
    for (std::size_t i = 0; i < host.destinations.size(); ++i)
      cudaMemcpy(host.destinations[i].bytes.data(), buffers.destinations[i].bytes.data(),
                 host.destinations[i].bytes.size(), cudaMemcpyDeviceToHost);
  }
};

enum class Side { kGpuHostShards, kGpuDeviceShards, kCpuCodecRaw };

struct StepOutcome {
  Bytes sent;
  std::int64_t dense = 0;
  std::int64_t unchanged = 0;
};

std::unique_ptr<DeltaExecutor> delta_executor(SharedNccl& shared, Bootstrap& bootstrap, Side side) {
  auto inner = std::make_unique<RankOfShared>(shared);
  if (side == Side::kCpuCodecRaw)
    return std::make_unique<DeltaExecutor>(std::move(inner), bootstrap, DeltaEncodeOptions{.entropy = false});
  auto kernels = nccl_detail::CudaDeltaKernels::on_device(0);
  if (!kernels) throw std::runtime_error(kernels.error().message);
  return std::make_unique<DeltaExecutor>(
      std::move(inner), bootstrap, std::make_unique<nccl_detail::DeviceDeltaMemory>(std::move(*kernels)));
}

// Every rank's outcome of each of `steps` steps, [rank][step]; every step verified on every rank.
std::vector<std::vector<StepOutcome>> run_delta(const ReshardProblem& problem, const Plan& plan, Side side,
                                                std::int32_t steps) {
  LoneBootstrap lone;
  auto nccl = NcclExecutor::create(
      lone, ExecutorOptions{.timeout = Seconds{60.0}},
      NcclSetup{.device = 0, .comm_rank_of = CommRankMap(static_cast<std::size_t>(plan.world_size()), 0)});
  EXPECT_TRUE(nccl) << nccl.error().message;
  if (!nccl) return {};
  SharedNccl shared(**nccl, plan.world_size());
  std::vector<std::vector<StepOutcome>> out(static_cast<std::size_t>(plan.world_size()));
  refit::testing::run_ranks(plan.world_size(), [&](std::int32_t r, Bootstrap& bootstrap) {
    auto executor = delta_executor(shared, bootstrap, side);
    auto host = HostShards::allocate(problem, Rank{r});
    auto weights =
        SyntheticShards::make(problem, host.buffers(), SyntheticUpdate{.change_fraction = 0.02, .seed = 5});
    ASSERT_TRUE(weights) << weights.error().message;
    const DeviceShards device(host.buffers());
    const bool on_device = side == Side::kGpuDeviceShards;
    auto prepared = executor->prepare(plan, Rank{r}, on_device ? device.buffers : host.buffers());
    ASSERT_TRUE(prepared) << prepared.error().message;
    for (std::int32_t s = 0; s < steps; ++s) {
      SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
      if (s > 0) ASSERT_TRUE(weights->advance());
      if (on_device) device.upload(host.buffers());
      auto report = executor->execute(**prepared);
      ASSERT_TRUE(report) << report.error().message;
      if (on_device) device.download(host.buffers());
      const auto verified = weights->verify();
      EXPECT_TRUE(verified) << verified.error().message;
      out[static_cast<std::size_t>(r)].push_back(
          {.sent = report->bytes_sent, .dense = report->delta->full, .unchanged = report->delta->unchanged});
    }
  });
  return out;
}

// 16 steps of a direct plan and of a relayed refit plan, 2 training ranks -> 2 inference ranks.
TEST(OneGpuDelta, EveryStepIsExactAndSendsWhatTheCpuCodecSends) {
  REFIT_REQUIRE_GPU();
  const auto problem = refit::testing::delta_problem();
  const auto cluster = refit::testing::make_test_cluster(2, 2, 2, 2);
  constexpr std::int32_t kSteps = 16;
  for (const auto* strategy : {"direct", "refit"}) {
    SCOPED_TRACE(strategy);
    const auto plan = make_plan(strategy, problem, cluster, PlanOptions{.chunk = Bytes{4096}}).value();
    const auto cpu = run_delta(problem, plan, Side::kCpuCodecRaw, kSteps);
    for (const auto side : {Side::kGpuHostShards, Side::kGpuDeviceShards}) {
      SCOPED_TRACE(side == Side::kGpuHostShards ? "host shards" : "device shards");
      const auto gpu = run_delta(problem, plan, side, kSteps);
      ASSERT_EQ(gpu.size(), cpu.size());
      for (std::size_t r = 0; r < gpu.size(); ++r)
        for (std::size_t s = 0; s < static_cast<std::size_t>(kSteps); ++s) {
          SCOPED_TRACE(::testing::Message() << "rank " << r << " step " << s);
          EXPECT_EQ(gpu[r][s].sent, cpu[r][s].sent);
          EXPECT_EQ(gpu[r][s].dense, cpu[r][s].dense);
          EXPECT_EQ(gpu[r][s].unchanged, cpu[r][s].unchanged);
        }
      std::printf("[ delta on the GPU ] %s, %s: %d steps verified\n", strategy,
                  side == Side::kGpuHostShards ? "host shards" : "device shards", kSteps);
    }
  }
}

}  // namespace
}  // namespace refit::gpu_testing
