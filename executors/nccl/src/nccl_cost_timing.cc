#include "nccl_cost_timing.h"

#include <algorithm>
#include <array>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_handles.h"
#include "nccl_cost_fit.h"
#include "refit/core/problem.h"
#include "refit/core/try.h"
#include "refit/executors/lone_bootstrap.h"
#include "refit/executors/nccl/nccl_executor.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/lowering/step_schedule.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/strategy.h"
#include "refit/topology/presets.h"

namespace refit::nccl_detail {
namespace {

constexpr std::int64_t kColumns = 4096;  // bf16: rows of 8 KiB

// How the transfer is cut: by 64 MiB, 16 to 256 chunks of 4 MiB to 256 KiB in 1 to 256 steps (a
// step holds at most 256 chunks and half the staging), so that chunks and steps vary apart, in
// chunks no smaller than the 256 KiB nccl_plan_bench's fit went down to.
struct Cut {
  Bytes chunk;
  Bytes staging;
};
constexpr std::array<Cut, 5> kCuts{{
    {.chunk = Bytes{4 << 20}, .staging = Bytes{256 << 20}},
    {.chunk = Bytes{1 << 20}, .staging = Bytes{256 << 20}},
    {.chunk = Bytes{256 << 10}, .staging = Bytes{256 << 20}},
    {.chunk = Bytes{256 << 10}, .staging = Bytes{2 << 20}},
    {.chunk = Bytes{256 << 10}, .staging = Bytes{512 << 10}},
}};

// One bf16 tensor of about `bytes`, whole on training rank 0 and wanted whole on inference rank 1.
[[nodiscard]] Result<ReshardProblem> one_tensor(Bytes bytes) {
  const Shape shape{std::max<std::int64_t>(1, bytes.value / (kColumns * 2)), kColumns};
  const auto from = REFIT_TRY(Mesh::make({1}, {Rank{0}}));
  const auto to = REFIT_TRY(Mesh::make({1}, {Rank{1}}));
  std::vector<TensorReshard> weights;
  weights.push_back({REFIT_TRY(make_tensor_spec("nccl_timing", shape, DType::kBF16)),
                     REFIT_TRY(Layout::make(shape, from, {Placement::shard(0)})),
                     REFIT_TRY(Layout::make(shape, to, {Placement::shard(0)}))});
  return ReshardProblem::make(std::move(weights), 1, 1);
}

// The median of `repetitions` executions of `plan` cut as `cut`, after one untimed.
[[nodiscard]] Result<NcclRun> time_cut(const Plan& plan, std::span<const LocalRankBuffers> ranks, int device,
                                       Cut cut, int repetitions) {
  const auto lowered = REFIT_TRY(lowering::LoweredPlan::make(plan, cut.staging));
  const auto schedule = REFIT_TRY(
      lowering::make_step_schedule(lowered, execution_model(ExecutionModelId::kRefitNccl).step_chunks));
  LoneBootstrap alone;
  auto executor =
      REFIT_TRY(NcclExecutor::create(alone, ExecutorOptions{.timeout = Seconds{60.0}, .staging = cut.staging},
                                     NcclSetup{.device = device, .comm_rank_of = {0, 0}}));
  auto prepared = REFIT_TRY(executor->prepare_ranks(plan, ranks));
  REFIT_TRY(executor->execute(*prepared));
  std::vector<double> seconds;
  for (int i = 0; i < repetitions; ++i)
    seconds.push_back(REFIT_TRY(executor->execute(*prepared)).elapsed.value);
  std::ranges::sort(seconds);
  return NcclRun{
      .chunks = lowered.chunks(), .steps = schedule.steps, .time = Seconds{seconds[seconds.size() / 2]}};
}

}  // namespace

Result<NcclCosts> time_nccl_costs(int device, Bytes bytes, int repetitions) {
  const auto problem = REFIT_TRY(one_tensor(bytes));
  const auto cluster = REFIT_TRY(size_preset_to_job("cpu-host", {.source_ranks = 1, .destination_ranks = 1}));
  const TensorSpec& tensor = problem.tensors().front().tensor;
  const Bytes shard = tensor.bytes();
  DeviceMemory source, destination;
  REFIT_TRY(source.allocate(static_cast<std::size_t>(shard.value), "cudaMalloc (the NCCL timing's source)"));
  REFIT_TRY(destination.allocate(static_cast<std::size_t>(shard.value),
                                 "cudaMalloc (the NCCL timing's destination)"));
  const Box whole{.offset = Shape(tensor.shape.size(), 0), .extent = tensor.shape};
  const auto span_of = [&](const DeviceMemory& m) {
    return std::span<std::byte>(m.get(), static_cast<std::size_t>(shard.value));
  };
  const std::vector<LocalRankBuffers> ranks{
      {.rank = Rank{0},
       .buffers = {.memory = MemoryKind::kCuda,
                   .sources = {{.tensor = 0, .box = whole, .bytes = span_of(source)}}}},
      {.rank = Rank{1},
       .buffers = {.memory = MemoryKind::kCuda,
                   .destinations = {{.tensor = 0, .box = whole, .bytes = span_of(destination)}}}}};
  std::vector<NcclRun> runs;
  for (const Cut cut : kCuts) {
    const auto plan = REFIT_TRY(make_plan("refit", problem, cluster, PlanOptions{.chunk = cut.chunk}));
    runs.push_back(REFIT_TRY_IN(time_cut(plan, ranks, device, cut, repetitions),
                                fmt::format("the NCCL executor in chunks of {} bytes, staging {} bytes",
                                            cut.chunk.value, cut.staging.value)));
  }
  const auto fit = fit_nccl_runs(runs);
  if (!fit) return invalid("the NCCL executor's runs did not tell its cost per chunk from its cost per step");
  // A chunk is a send and a receive of this one process; a negative term (a noisy run) is 0.
  return NcclCosts{.per_op = Seconds{std::max(0.0, fit->per_chunk.value) / 2},
                   .per_step = Seconds{std::max(0.0, fit->per_step.value)}};
}

}  // namespace refit::nccl_detail
