#include "refit/executors/nccl/nccl_executor.h"

#include <fmt/format.h>

#include "communicator.h"
#include "cuda_backend.h"
#include "cuda_status.h"
#include "host_mirror.h"
#include "local_view.h"
#include "program_bounds.h"
#include "translate.h"

namespace refit {
namespace {

using nccl_detail::Communicator;

class NcclPrepared final : public PreparedPlan {
 public:
  nccl_detail::HostMirror mirror;  // device copies of host shards, if any
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

// Every shard is device memory of the communicator's GPU: NCCL and the kernels read it there.
Result<void> check_device_memory(std::span<const LocalRankBuffers> ranks, int device) {
  for (const auto& r : ranks)
    for (const auto* side : {&r.buffers.sources, &r.buffers.destinations})
      for (std::size_t i = 0; i < side->size(); ++i) {
        const auto& bytes = (*side)[i].bytes;
        if (bytes.empty()) continue;
        cudaPointerAttributes a{};
        const auto at = fmt::format("rank {}, {}[{}]", r.rank.value,
                                    side == &r.buffers.sources ? "sources" : "destinations", i);
        if (cudaPointerGetAttributes(&a, bytes.data()) != cudaSuccess ||
            (a.type != cudaMemoryTypeDevice && a.type != cudaMemoryTypeManaged) || a.device != device) {
          cudaGetLastError();  // clear the sticky-free error of a failed query
          return invalid(fmt::format("{}: the buffer is not CUDA memory of GPU {}", at, device));
        }
      }
  return {};
}

Result<std::unique_ptr<NcclPrepared>> prepare_locally(const Plan& plan,
                                                      std::span<const LocalRankBuffers> given,
                                                      Communicator& comm, const CommRankMap& map,
                                                      Bytes staging) {
  const nccl_detail::DeviceGuard guard(comm.device());
  if (!guard.status()) return std::unexpected(guard.status().error());
  auto mirror = nccl_detail::HostMirror::make(given);
  if (!mirror) return std::unexpected(std::move(mirror.error()));
  auto prepared = std::make_unique<NcclPrepared>();
  prepared->mirror = std::move(*mirror);
  const auto& ranks = prepared->mirror.device_ranks();
  auto view = nccl_detail::make_local_view(plan, ranks, map, {comm.rank(), comm.size()}, MemoryKind::kCuda);
  if (!view) return std::unexpected(std::move(view.error()));
  if (auto ok = check_device_memory(ranks, comm.device()); !ok) return std::unexpected(std::move(ok.error()));
  auto program = nccl_detail::build_program(plan, *view, staging);
  if (!program) return std::unexpected(std::move(program.error()));
  prepared->program = std::move(*program);
  std::vector<std::int64_t> sizes;
  std::vector<std::byte*> pointers;
  for (const auto& s : view->shards) {
    sizes.push_back(static_cast<std::int64_t>(s.size()));
    pointers.push_back(s.data());
  }
  if (auto ok = nccl_detail::check_bounds(prepared->program, sizes); !ok)
    return std::unexpected(std::move(ok.error()));
  auto backend = nccl_detail::CudaBackend::make(prepared->program, pointers, comm);
  if (!backend) return std::unexpected(std::move(backend.error()));
  prepared->backend = std::move(*backend);
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
    auto local = nccl_detail::host_local_rank(bootstrap);
    if (!local) return std::unexpected(std::move(local.error()));
    int count = 0;
    if (auto ok = nccl_detail::cuda_ok(cudaGetDeviceCount(&count), "cudaGetDeviceCount"); !ok)
      return std::unexpected(
          std::move(ok.error()).in(fmt::format("nccl executor, rank {}", bootstrap.rank())));
    if (count == 0)
      return fail(ErrorCode::kRuntime,
                  fmt::format("nccl executor, rank {}: no CUDA device", bootstrap.rank()));
    device = *local % count;
  }
  auto comm = Communicator::create(bootstrap, device, options.timeout);
  if (!comm)
    return std::unexpected(
        std::move(comm.error()).in(fmt::format("nccl executor, rank {}", bootstrap.rank())));
  return std::unique_ptr<NcclExecutor>(
      new NcclExecutor(std::move(*comm), options, std::move(setup.comm_rank_of)));
}

Result<std::unique_ptr<NcclExecutor>> NcclExecutor::adopt(ncclComm_t comm, const ExecutorOptions& options,
                                                          CommRankMap comm_rank_of) {
  auto c = Communicator::adopt(comm, options.timeout);
  if (!c) return std::unexpected(std::move(c.error()).in("nccl executor"));
  return std::unique_ptr<NcclExecutor>(new NcclExecutor(std::move(*c), options, std::move(comm_rank_of)));
}

Result<std::unique_ptr<PreparedPlan>> NcclExecutor::prepare(const Plan& plan, Rank rank,
                                                            const RankBuffers& buffers) {
  const LocalRankBuffers one{rank, buffers};
  return prepare_ranks(plan, std::span(&one, 1));
}

Result<std::unique_ptr<PreparedPlan>> NcclExecutor::prepare_ranks(const Plan& plan,
                                                                  std::span<const LocalRankBuffers> ranks) {
  const auto who = who_of(ranks, *comm_);
  if (comm_->aborted())
    return fail(ErrorCode::kRuntime, who + ": the communicator was aborted by an earlier failure");
  // The plan's structure before any device work; the rest of the checks happen on the way.
  const auto structure = validate_structure(plan);
  auto prepared = structure ? prepare_locally(plan, ranks, *comm_, comm_rank_of_, options_.staging)
                            : std::unexpected(structure.error());
  // Collective even when this rank failed, so that the others fail too instead of waiting. The
  // staging sets the chunks, so the ranks agree on it as on the plan.
  const std::uint64_t agreed_on =
      plan_hash(plan) ^ (static_cast<std::uint64_t>(options_.staging.value) * 0x9e3779b97f4a7c15ull);
  auto agreed = comm_->agree(agreed_on, prepared.has_value(), options_.timeout);
  if (!prepared) return std::unexpected(std::move(prepared.error()).in(who));
  if (!agreed) return std::unexpected(std::move(agreed.error()).in(who));
  return std::unique_ptr<PreparedPlan>(std::move(*prepared));
}

Result<ExecutionReport> NcclExecutor::execute(PreparedPlan& prepared) {
  auto* mine = dynamic_cast<NcclPrepared*>(&prepared);
  if (mine == nullptr || mine->comm != comm_.get())
    return invalid("nccl executor: the plan was prepared by another executor");
  if (comm_->aborted())
    return fail(ErrorCode::kRuntime, mine->who + ": the communicator was aborted by an earlier failure");
  const nccl_detail::DeviceGuard guard(comm_->device());
  if (!guard.status()) return std::unexpected(Error(guard.status().error()).in(mine->who));
  if (auto ok = mine->mirror.upload_sources(); !ok)
    return std::unexpected(std::move(ok.error()).in(mine->who));
  auto elapsed =
      nccl_detail::run_program(mine->program, *mine->backend, {options_.timeout, 4, options_.on_chunk_sent});
  if (!elapsed) return std::unexpected(std::move(elapsed.error()).in(mine->who));
  if (auto ok = mine->mirror.download_destinations(); !ok)
    return std::unexpected(std::move(ok.error()).in(mine->who));
  const auto& p = mine->program;
  return ExecutionReport{Bytes{p.bytes_sent}, Bytes{p.bytes_received}, *elapsed, p.messages, Bytes{0}};
}

Result<std::unique_ptr<Executor>> make_nccl_executor(Bootstrap& bootstrap, const ExecutorOptions& options) {
  auto made = NcclExecutor::create(bootstrap, options);
  if (!made) return std::unexpected(std::move(made.error()));
  return std::unique_ptr<Executor>(std::move(*made));
}

}  // namespace refit
