#include "refit/executors/nccl/nccl_executor.h"

#include <fmt/format.h>

#include "communicator.h"
#include "cuda_backend.h"
#include "cuda_status.h"
#include "host_mirror.h"
#include "local_view.h"
#include "program_bounds.h"
#include "quantized_sources.h"
#include "refit/core/try.h"
#include "refit/executors/rank_buffers.h"
#include "translate.h"

namespace refit {
namespace {

using nccl_detail::Communicator;

class NcclPrepared final : public PreparedPlan {
 public:
  nccl_detail::HostMirror mirror;                    // device copies of host shards, if any
  std::vector<nccl_detail::DeviceMemory> quantized;  // fp8 values and scales made before sending
  nccl_detail::Program program;
  std::unique_ptr<nccl_detail::CudaBackend> backend;
  const Communicator* comm = nullptr;
  std::string who;  // "rank 5 (communicator rank 5)"
};

std::string who_of(std::span<const LocalRankBuffers> ranks, const Communicator& comm) {
  std::string plan_ranks;
  for (const auto& r : ranks) plan_ranks += fmt::format("{}{}", plan_ranks.empty() ? "" : ",", r.rank.value);
  return fmt::format("nccl executor, rank{} {} (communicator rank {})", ranks.size() == 1 ? "" : "s",
                     plan_ranks, comm.rank());
}

// Every buffer (shard, or framework parameter) is device memory of the communicator's GPU: NCCL
// and the kernels read it there.
[[nodiscard]] Result<void> check_device_memory(std::span<const LocalRankBuffers> ranks, int device) {
  for (const auto& r : ranks)
    for (const bool source : {true, false}) {
      const auto buffers = side_buffers(r.buffers, source);
      const bool parameters =
          !(source ? r.buffers.source_parameters : r.buffers.destination_parameters).empty();
      for (std::size_t i = 0; i < buffers.size(); ++i) {
        const auto& bytes = buffers[i];
        if (bytes.empty()) continue;
        cudaPointerAttributes a{};
        const auto at = fmt::format("rank {}, {}{}[{}]", r.rank.value, source ? "source" : "destination",
                                    parameters ? "_parameters" : "s", i);
        if (cudaPointerGetAttributes(&a, bytes.data()) != cudaSuccess ||
            (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) || a.device != device) {
          cudaGetLastError();  // clear the sticky-free error of a failed query
          return mismatch(fmt::format("{}: the buffer is not CUDA memory of GPU {}", at, device));
        }
      }
    }
  return {};
}

// The plan is checked (LoweredPlan::make) before any device work; the rest of the checks on the way.
[[nodiscard]] Result<std::unique_ptr<NcclPrepared>> prepare_locally(const Plan& plan,
                                                                    std::span<const LocalRankBuffers> given,
                                                                    Communicator& comm,
                                                                    const CommRankMap& map, Bytes staging) {
  const auto lowered = REFIT_TRY(lowering::LoweredPlan::make(plan, staging));
  const nccl_detail::DeviceGuard guard(comm.device());
  REFIT_TRY(guard.status());
  auto mirror = REFIT_TRY(nccl_detail::HostMirror::make(given));
  auto prepared = std::make_unique<NcclPrepared>();
  prepared->mirror = std::move(mirror);
  const auto& ranks = prepared->mirror.device_ranks();
  const auto allocate = [&](Bytes bytes, std::string_view what) -> Result<std::span<std::byte>> {
    auto& memory = prepared->quantized.emplace_back();
    REFIT_TRY(memory.allocate(static_cast<std::size_t>(bytes.value), fmt::format("cudaMalloc ({})", what)));
    return std::span(memory.get(), static_cast<std::size_t>(bytes.value));
  };
  const auto quantized = REFIT_TRY(nccl_detail::QuantizedSources::make(plan, ranks, allocate));
  auto view = REFIT_TRY(nccl_detail::make_local_view(plan, quantized.ranks(), map, {comm.rank(), comm.size()},
                                                     MemoryKind::kCuda));
  REFIT_TRY(check_device_memory(ranks, comm.device()));
  const auto quantize = quantized.add_to(view);
  prepared->program = REFIT_TRY(nccl_detail::build_program(lowered, view, quantize));
  std::vector<std::int64_t> sizes;
  std::vector<std::byte*> pointers;
  for (const auto& s : view.shards) {
    sizes.push_back(static_cast<std::int64_t>(s.size()));
    pointers.push_back(s.data());
  }
  REFIT_TRY(nccl_detail::check_bounds(prepared->program, sizes));
  prepared->backend = REFIT_TRY(nccl_detail::CudaBackend::make(prepared->program, pointers, comm));
  prepared->comm = &comm;
  prepared->who = who_of(ranks, comm);
  return prepared;
}

}  // namespace

NcclExecutor::NcclExecutor(std::unique_ptr<Communicator> comm, const ExecutorOptions& options,
                           CommRankMap map)
    : comm_(std::move(comm)), options_(options), comm_rank_of_(std::move(map)) {}

NcclExecutor::~NcclExecutor() = default;

Result<std::unique_ptr<NcclExecutor>> NcclExecutor::create(Bootstrap& bootstrap,
                                                           const ExecutorOptions& options, NcclSetup setup) {
  int device = setup.device;
  if (device == kDeviceOfHostRank) {
    const auto local = REFIT_TRY(nccl_detail::host_local_rank(bootstrap));
    int count = 0;
    REFIT_TRY_IN(nccl_detail::cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount"),
                 fmt::format("nccl executor, rank {}", bootstrap.rank()));
    if (count == 0)
      return fail(ErrorCode::kRuntime,
                  fmt::format("nccl executor, rank {}: no CUDA device", bootstrap.rank()));
    device = local % count;
  }
  auto comm = REFIT_TRY_IN(Communicator::create(bootstrap, device, options.timeout),
                           fmt::format("nccl executor, rank {}", bootstrap.rank()));
  return std::unique_ptr<NcclExecutor>(
      new NcclExecutor(std::move(comm), options, std::move(setup.comm_rank_of)));
}

Result<std::unique_ptr<NcclExecutor>> NcclExecutor::adopt(ncclComm_t comm, const ExecutorOptions& options,
                                                          CommRankMap comm_rank_of) {
  auto c = REFIT_TRY_IN(Communicator::adopt(comm, options.timeout), "nccl executor");
  return std::unique_ptr<NcclExecutor>(new NcclExecutor(std::move(c), options, std::move(comm_rank_of)));
}

Result<std::unique_ptr<PreparedPlan>> NcclExecutor::prepare(const Plan& plan, Rank rank,
                                                            const RankBuffers& buffers) {
  const LocalRankBuffers one{.rank = rank, .buffers = buffers};
  return prepare_ranks(plan, std::span(&one, 1));
}

Result<std::unique_ptr<PreparedPlan>> NcclExecutor::prepare_ranks(const Plan& plan,
                                                                  std::span<const LocalRankBuffers> ranks) {
  const auto who = who_of(ranks, *comm_);
  if (comm_->aborted())
    return fail(ErrorCode::kRuntime, who + ": the communicator was aborted by an earlier failure");
  auto prepared = prepare_locally(plan, ranks, *comm_, comm_rank_of_, options_.staging);
  // Collective even when this rank failed, so that the others fail too instead of waiting. The
  // staging sets the chunks, so the ranks agree on it as on the plan.
  const std::uint64_t agreed_on =
      plan_hash(plan) ^ (static_cast<std::uint64_t>(options_.staging.value) * 0x9e3779b97f4a7c15ull);
  auto agreed = comm_->agree(agreed_on, prepared.has_value(), options_.timeout);
  // This rank's own failure comes first.
  auto mine = REFIT_TRY_IN(prepared, who);
  REFIT_TRY_IN(agreed, who);
  return std::unique_ptr<PreparedPlan>(std::move(mine));
}

Result<ExecutionReport> NcclExecutor::execute(PreparedPlan& prepared) {
  auto* mine = dynamic_cast<NcclPrepared*>(&prepared);
  if (mine == nullptr || mine->comm != comm_.get())
    return invalid("nccl executor: the plan was prepared by another executor");
  if (comm_->aborted())
    return fail(ErrorCode::kRuntime, mine->who + ": the communicator was aborted by an earlier failure");
  const nccl_detail::DeviceGuard guard(comm_->device());
  REFIT_TRY_IN(guard.status(), mine->who);
  REFIT_TRY_IN(mine->mirror.upload_sources(), mine->who);
  const nccl_detail::RunOptions run_options{.timeout = options_.timeout,
                                            .window = 4,
                                            .on_chunk_sent = options_.on_chunk_sent,
                                            .interrupted = options_.interrupted};
  const auto elapsed =
      REFIT_TRY_IN(nccl_detail::run_program(mine->program, *mine->backend, run_options), mine->who);
  REFIT_TRY_IN(mine->mirror.download_destinations(), mine->who);
  const auto& p = mine->program;
  return ExecutionReport{.bytes_sent = Bytes{p.bytes_sent},
                         .bytes_received = Bytes{p.bytes_received},
                         .elapsed = elapsed,
                         .messages = p.messages,
                         .stored_directly = Bytes{0}};
}

Result<std::unique_ptr<Executor>> make_nccl_executor(Bootstrap& bootstrap, const ExecutorOptions& options) {
  auto made = REFIT_TRY(NcclExecutor::create(bootstrap, options));
  return std::unique_ptr<Executor>(std::move(made));
}

}  // namespace refit
