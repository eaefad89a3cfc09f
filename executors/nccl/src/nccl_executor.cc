#include "refit/executors/nccl/nccl_executor.h"

#include <fmt/format.h>

#include "communicator.h"
#include "cuda_backend.h"
#include "cuda_status.h"
#include "host_mirror.h"
#include "local_view.h"
#include "member_program.h"
#include "program_bounds.h"
#include "quantized_sources.h"
#include "refit/core/try.h"
#include "refit/executors/rank_buffers.h"
#include "shrink_ranks.h"
#include "translate.h"

namespace refit {
namespace nccl_detail {

// A step over one membership: its program, and the staging and events it runs on, made on the
// membership's first execution and kept while the membership and the communicator last.
struct MemberRun {
  std::uint64_t epoch = 0;
  std::vector<bool> members;
  std::int32_t shrinks = 0;
  MemberProgram made;
  std::unique_ptr<CudaBackend> backend;
};

class NcclPrepared final : public PreparedPlan {
 public:
  HostMirror mirror;                    // device copies of host shards, if any
  std::vector<DeviceMemory> quantized;  // fp8 values and scales made before sending
  Program program;
  std::unique_ptr<CudaBackend> backend;
  const Communicator* comm = nullptr;
  std::string who;  // "rank 5 (communicator rank 5)"
  // What a step over a membership is derived from: the full plan and this process's part of it.
  Plan plan;
  LocalView view;
  std::vector<nccl_detail::QuantizedBox> quantize;
  std::vector<std::int64_t> sizes;  // by shard index
  std::vector<std::byte*> pointers;
  std::optional<MemberRun> member;
};

}  // namespace nccl_detail

namespace {

using nccl_detail::Communicator;
using nccl_detail::MemberRun;
using nccl_detail::NcclPrepared;

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
  prepared->quantize = quantized.add_to(view);
  prepared->program = REFIT_TRY(nccl_detail::build_program(lowered, view, prepared->quantize));
  for (const auto& s : view.shards) {
    prepared->sizes.push_back(static_cast<std::int64_t>(s.size()));
    prepared->pointers.push_back(s.data());
  }
  REFIT_TRY(nccl_detail::check_bounds(prepared->program, prepared->sizes));
  prepared->backend = REFIT_TRY(nccl_detail::CudaBackend::make(prepared->program, prepared->pointers, comm));
  prepared->comm = &comm;
  prepared->who = who_of(ranks, comm);
  prepared->plan = plan;
  prepared->view = std::move(view);
  return prepared;
}

// A step over a membership that fails revokes the communicator rather than aborting it, so that
// it can be shrunk without the dead; the step then runs again, for the survivors.
constexpr const char* kRevokedHint =
    "a step over the membership failed and the communicator was revoked: exclude the dead ranks "
    "(exclude_gone) on every survivor, then execute again, which runs the step for the survivors";

// An elastic step's error, saying what to do next when the communicator was revoked.
std::unexpected<Error> step_failed(const Error& e, const std::string& who, const Communicator& comm) {
  return fail(e.code, comm.revoked() ? fmt::format("{}: {}; {}", who, e.message, kRevokedHint)
                                     : fmt::format("{}: {}", who, e.message));
}

// The program of a step over `m` on this process, with its own staging; `comm_rank_of` the
// communicator ranks now, kNoCommRank for plan ranks gone.
[[nodiscard]] Result<MemberRun> member_run(const NcclPrepared& p, const EngineMembership& m,
                                           const CommRankMap& comm_rank_of, std::int32_t shrinks,
                                           Communicator& comm, Bytes staging) {
  std::vector<bool> gone;
  for (const auto c : comm_rank_of) gone.push_back(c == nccl_detail::kNoCommRank);
  auto made =
      REFIT_TRY(nccl_detail::member_program(p.plan, m, gone, p.view, comm_rank_of, p.quantize, staging));
  REFIT_TRY(nccl_detail::check_bounds(made.program, p.sizes));
  auto backend = REFIT_TRY(
      nccl_detail::CudaBackend::make(made.program, p.pointers, comm, nccl_detail::OnFailure::kRevoke));
  return MemberRun{.epoch = m.epoch,
                   .members = m.members,
                   .shrinks = shrinks,
                   .made = std::move(made),
                   .backend = std::move(backend)};
}

// What every process of a step over a membership must share: the step's plan, the epoch and
// the staging (which sets the chunks).
std::uint64_t member_vote(const MemberRun& run, Bytes staging) {
  constexpr std::uint64_t kMix = 0x9e3779b97f4a7c15ull;
  return plan_hash(run.made.step.plan) ^ (run.epoch * kMix) ^
         (static_cast<std::uint64_t>(staging.value) * kMix * kMix);
}

// Uploads the sources, runs `program`, downloads the destinations.
[[nodiscard]] Result<Seconds> run_on_device(NcclPrepared& p, const nccl_detail::Program& program,
                                            nccl_detail::Backend& backend, const ExecutorOptions& options) {
  REFIT_TRY(p.mirror.upload_sources());
  const nccl_detail::RunOptions run_options{.timeout = options.timeout,
                                            .window = 4,
                                            .on_chunk_sent = options.on_chunk_sent,
                                            .interrupted = options.interrupted};
  const auto elapsed = REFIT_TRY(nccl_detail::run_program(program, backend, run_options));
  REFIT_TRY(p.mirror.download_destinations());
  return elapsed;
}

}  // namespace

NcclExecutor::NcclExecutor(std::unique_ptr<Communicator> comm, const ExecutorOptions& options,
                           CommRankMap map)
    : comm_(std::move(comm)), options_(options), comm_rank_of_(std::move(map)) {}

NcclExecutor::~NcclExecutor() = default;

int NcclExecutor::device() const { return comm_->device(); }

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
  if (shrinks_ > 0)
    return fail(ErrorCode::kRuntime, who +
                                         ": the communicator was shrunk; plans are prepared before (a step "
                                         "over a membership derives its own from them)");
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
  if (comm_->revoked()) return fail(ErrorCode::kRuntime, mine->who + ": " + kRevokedHint);
  if (membership_) return execute_members(*mine);
  if (shrinks_ > 0)
    return fail(ErrorCode::kRuntime, mine->who +
                                         ": the communicator was shrunk since the plan was prepared, and its "
                                         "full program names the ranks of before: set a membership");
  const nccl_detail::DeviceGuard guard(comm_->device());
  REFIT_TRY_IN(guard.status(), mine->who);
  const auto elapsed = REFIT_TRY_IN(run_on_device(*mine, mine->program, *mine->backend, options_), mine->who);
  const auto& p = mine->program;
  return ExecutionReport{.bytes_sent = Bytes{p.bytes_sent},
                         .bytes_received = Bytes{p.bytes_received},
                         .elapsed = elapsed,
                         .messages = p.messages,
                         .stored_directly = Bytes{0}};
}

Result<void> NcclExecutor::set_membership(const EngineMembership& membership) {
  // The plan's world: the map's size, or the communicator's when plan ranks are its ranks.
  const auto world = comm_rank_of_.empty() ? comm_->size() : static_cast<std::int32_t>(comm_rank_of_.size());
  REFIT_TRY_IN(check_set_membership(membership, world), "nccl executor");
  membership_ = membership;
  return {};
}

// A membership's first execution builds its program and agrees on it with every process (as
// prepare does): a process of another epoch makes every process fail before any byte moves.
Result<ExecutionReport> NcclExecutor::execute_members(NcclPrepared& mine) {
  const auto& m = *membership_;
  const auto who = fmt::format("{}, membership epoch {}", mine.who, m.epoch);
  const nccl_detail::DeviceGuard guard(comm_->device());
  REFIT_TRY_IN(guard.status(), who);
  if (!mine.member || mine.member->epoch != m.epoch || mine.member->members != m.members ||
      mine.member->shrinks != shrinks_) {
    mine.member.reset();  // its staging is freed before the next one is allocated
    const auto& map = comm_rank_of_.empty() ? mine.view.comm_rank_of : comm_rank_of_;
    auto built = member_run(mine, m, map, shrinks_, *comm_, options_.staging);
    auto agreed = comm_->agree(built ? member_vote(*built, options_.staging) : 0, built.has_value(),
                               options_.timeout, nccl_detail::OnFailure::kRevoke);
    auto run = REFIT_TRY_IN(std::move(built), who);
    if (!agreed) return step_failed(agreed.error(), who, *comm_);
    mine.member = std::move(run);
  }
  auto& run = *mine.member;
  auto ran = run_on_device(mine, run.made.program, *run.backend, options_);
  if (!ran) return step_failed(ran.error(), who, *comm_);
  const auto elapsed = *ran;
  const auto& p = run.made.program;
  return ExecutionReport{.bytes_sent = Bytes{p.bytes_sent},
                         .bytes_received = Bytes{p.bytes_received},
                         .elapsed = elapsed,
                         .messages = p.messages,
                         .stored_directly = Bytes{0},
                         .engines = run.made.step.engines};
}

Result<void> NcclExecutor::exclude_gone(std::span<const std::int32_t> gone, std::uint64_t epoch) {
  const auto who = fmt::format("nccl executor, communicator rank {}", comm_->rank());
  auto map = comm_rank_of_;
  if (map.empty())
    for (std::int32_t r = 0; r < comm_->size(); ++r) map.push_back(r);
  const auto s = REFIT_TRY_IN(nccl_detail::shrink_ranks(map, comm_->size(), gone, comm_->rank(), epoch), who);
  REFIT_TRY_IN(comm_->shrink(s.exclude), who);
  comm_rank_of_ = s.comm_rank_of;
  ++shrinks_;
  return {};
}

}  // namespace refit
