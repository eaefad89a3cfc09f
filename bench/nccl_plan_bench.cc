// The NCCL executor on one GPU moving a plan of DeepSeek-V3-like boxes, every plan rank in this
// process over a communicator of size 1 (each send and receive NCCL's send-to-self), against
// cudaMemcpy device to device of the same bytes in the same run; and what a chunk and a step
// cost, fitted over runs that differ in chunk size and staging.
//
// The problem: DeepSeek-V3's layer 3 (MLA attention, shared expert, router) with its routed
// experts cut to 64 (three stacked [64, 2048, 7168] bf16 projections), 6.1 GB, from Megatron
// tp=8, ep=8, etp=1 (8 training ranks) to one vLLM engine of tp=8 (experts split along their
// projections, so down_proj's shards are 512-byte columns): 16 plan ranks, sources and
// destinations on the one GPU. Each configuration is prepared, executed once and verified element
// by element, then executed kRuns times; the figure is the mean of ExecutionReport::elapsed (the
// host's time from the first operation issued to the last one finished). The program's counts
// (steps, chunks, copy-kernel launches, NCCL operations) come from the same translation the
// executor runs. t = t0 + chunks * c + steps * s is fitted by least squares (fit_nccl_runs) over
// the configurations: c and s are the per-chunk and per-step costs of the simulator's NCCL
// execution model (refit/topology/measured_kernels.h: a chunk is a send and a receive of the one
// process, c / 2 each), which `refit topo --discover --measure` fits alike on a smaller plan.
// Exits 0 without a GPU, printing why.
//
// Usage: nccl_plan_bench [--summary FILE]   (rows are appended to FILE too)
#include <cuda_runtime_api.h>

#include <string>
#include <vector>

#include "cuda_handles.h"
#include "device_ranks.h"
#include "gpu_bench.h"
#include "local_view.h"
#include "nccl_cost_fit.h"
#include "refit/executors/nccl/nccl_executor.h"
#include "refit/models/builtin_models.h"
#include "refit/models/problem_builder.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "translate.h"

namespace refit {
namespace {

constexpr int kRuns = 3;
constexpr std::int64_t kExperts = 64;
constexpr std::int32_t kLayer = 3;  // DeepSeek-V3's first MoE layer

ReshardProblem deepseek_like_problem() {
  auto model = models::builtin_model("deepseek-v3").value();
  std::vector<models::WeightTensor> kept;
  for (auto t : model.tensors) {
    if (t.layer != kLayer) continue;
    if (t.is_routed_expert()) {
      t.routed_experts = static_cast<std::int32_t>(kExperts);
      t.spec.shape[0] = kExperts;
    }
    kept.push_back(std::move(t));
  }
  model.tensors = std::move(kept);
  model.num_experts = kExperts;
  return models::build_problem(model, models::parse_megatron("tp=8,ep=8,etp=1").value(),
                               models::parse_vllm("tp=8").value())
      .value();
}

struct Config {
  Bytes chunk;
  Bytes staging;
};

struct Counts {
  std::int64_t steps = 0;
  std::int64_t chunks = 0;    // sent (each is also received, in this one process)
  std::int64_t launches = 0;  // copy-kernel launches
  std::int64_t copies = 0;    // boxes those launches copy
};

Counts count(const Plan& plan, std::span<const LocalRankBuffers> buffers, const CommRankMap& map,
             Bytes staging) {
  const auto view = nccl_detail::make_local_view(plan, buffers, map, {0, 1}, MemoryKind::kCuda).value();
  const auto lowered = lowering::LoweredPlan::make(plan, staging).value();
  const auto program = nccl_detail::build_program(lowered, view).value();
  Counts c{.steps = static_cast<std::int64_t>(program.blocks.size())};
  for (const auto& op : program.ops) {
    if (const auto* p = std::get_if<nccl_detail::P2p>(&op);
        p && p->direction == nccl_detail::Direction::kSend)
      ++c.chunks;
    if (const auto* b = std::get_if<nccl_detail::CopyBatch>(&op)) {
      ++c.launches;
      c.copies += static_cast<std::int64_t>(b->copies.size());
    }
  }
  return c;
}

struct Measured {
  Config config;
  Counts counts;
  std::int64_t bytes = 0;  // the plan's transfers
  double ms = 0;
};

// Mean execution time of `config`'s plan, verified once.
Measured measure(const ReshardProblem& problem, const PlacedCluster& cluster,
                 const gpu_testing::DeviceRanks& ranks, const Config& config) {
  const auto plan = make_plan("refit", problem, cluster, PlanOptions{.chunk = config.chunk}).value();
  const CommRankMap all_on_one(static_cast<std::size_t>(problem.world_size()), 0);
  LoneBootstrap bootstrap;
  auto executor =
      NcclExecutor::create(
          bootstrap,
          ExecutorOptions{.timeout = Seconds{120.0}, .staging = config.staging, .on_chunk_sent = {}},
          NcclSetup{.device = 0, .comm_rank_of = all_on_one})
          .value();
  auto prepared = executor->prepare_ranks(plan, ranks.ranks).value();
  gpu_testing::clear_destinations(ranks);
  if (auto first = executor->execute(*prepared); !first) {
    std::fprintf(stderr, "execute: %s\n", first.error().message.c_str());
    std::exit(1);
  }
  if (auto ok = gpu_testing::verify_device_destinations(problem, ranks); !ok) {
    std::fprintf(stderr, "verification: %s\n", ok.error().message.c_str());
    std::exit(1);
  }
  double seconds = 0;
  for (int r = 0; r < kRuns; ++r) seconds += executor->execute(*prepared).value().elapsed.value;
  std::int64_t bytes = 0;
  for (const auto& t : plan.transfers) bytes += t.bytes.value;
  return Measured{.config = config,
                  .counts = count(plan, ranks.ranks, all_on_one, config.staging),
                  .bytes = bytes,
                  .ms = seconds / kRuns * 1e3};
}

double memcpy_gbps(cudaStream_t stream) {
  constexpr std::int64_t kBytes = std::int64_t{2} << 30;
  nccl_detail::DeviceMemory a, b;
  if (!a.allocate(kBytes, "memcpy a") || !b.allocate(kBytes, "memcpy b")) std::exit(1);
  return static_cast<double>(kBytes) / gpu_bench::memcpy_ms(b.get(), a.get(), kBytes, stream) / 1e6;
}

}  // namespace
}  // namespace refit

int main(int argc, char** argv) {
  using namespace refit;
  if (!gpu_bench::have_gpu("nccl_plan_bench")) return 0;
  gpu_bench::Summary summary(argc, argv, "NCCL executor, one GPU (bench/nccl_plan_bench)");
  const auto problem = deepseek_like_problem();
  const auto cluster = testing::make_test_cluster(2, 8, 8, 8);
  const auto ranks = gpu_testing::make_device_ranks(problem);
  std::int64_t weight_bytes = 0;
  for (const auto& t : problem.tensors()) weight_bytes += t.tensor.bytes().value;
  cudaStream_t stream = nullptr;
  REFIT_BENCH_CUDA(cudaStreamCreate(&stream));
  const double reference_gbps = memcpy_gbps(stream);
  summary.print(
      "DeepSeek-V3 layer %d with %lld experts (%.2f GB of weights), Megatron tp=8,ep=8,etp=1 -> vLLM "
      "tp=8, strategy refit; cudaMemcpy device to device moves %.0f GB/s. Mean of %d executions each; "
      "\"of cudaMemcpy\": cudaMemcpy's time for the plan's bytes over the execution's.\n\n",
      kLayer, static_cast<long long>(kExperts), static_cast<double>(weight_bytes) / 1e9, reference_gbps,
      kRuns);
  summary.print(
      "| chunk | staging | plan GB | steps | chunks | copy launches | boxes copied | ms | GB/s | of "
      "cudaMemcpy |\n");
  summary.print("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
  std::vector<Measured> all;
  for (const Config c :
       {Config{Bytes{8 << 20}, Bytes{256 << 20}}, Config{Bytes{1 << 20}, Bytes{256 << 20}},
        Config{Bytes{256 << 10}, Bytes{256 << 20}}, Config{Bytes{256 << 10}, Bytes{4 << 20}}}) {
    const auto m = measure(problem, cluster, ranks, c);
    all.push_back(m);
    const double bytes = static_cast<double>(m.bytes);
    summary.print("| %lld KiB | %lld MiB | %.2f | %lld | %lld | %lld | %lld | %.3f | %.0f | %.1f %% |\n",
                  static_cast<long long>(c.chunk.value >> 10), static_cast<long long>(c.staging.value >> 20),
                  bytes / 1e9, static_cast<long long>(m.counts.steps),
                  static_cast<long long>(m.counts.chunks), static_cast<long long>(m.counts.launches),
                  static_cast<long long>(m.counts.copies), m.ms, bytes / m.ms / 1e6,
                  100 * bytes / reference_gbps / 1e6 / m.ms);
  }
  std::vector<nccl_detail::NcclRun> runs;
  for (const auto& m : all)
    runs.push_back({.chunks = m.counts.chunks, .steps = m.counts.steps, .time = Seconds{m.ms / 1e3}});
  if (const auto f = nccl_detail::fit_nccl_runs(runs))
    summary.print("\nFitted: t = %.3f ms + chunks x %.2f us + steps x %.2f us\n", f->fixed.value * 1e3,
                  f->per_chunk.value * 1e6, f->per_step.value * 1e6);
  else
    summary.print("\nNot fitted: the configurations do not tell chunks from steps\n");
  cudaStreamDestroy(stream);
  return 0;
}
