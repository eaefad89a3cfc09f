#include "communicator.h"

#include <unistd.h>

#include <array>
#include <cstring>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "cuda_handles.h"
#include "cuda_status.h"
#include "refit/core/elapsed.h"
#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

Clock::time_point deadline_after(Seconds s) { return Clock::now() + to_duration(s); }

// Rank 0's unique id, on every rank. Rank 0 takes part in the allgather even when it could not
// make an id, so that no rank waits for it.
[[nodiscard]] Result<ncclUniqueId> shared_id(Bootstrap& bootstrap) {
  ncclUniqueId id{};
  std::string mine;
  Result<void> made;
  if (bootstrap.rank() == 0) {
    made = nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (made) mine.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  auto gathered = bootstrap.allgather(mine);
  REFIT_TRY(made);
  const auto all = REFIT_TRY_IN(gathered, "allgather of the NCCL unique id");
  const auto& from_root = all.front();
  if (from_root.size() != sizeof id)
    return fail(ErrorCode::kPeerFailed,
                fmt::format("rank 0 sent a NCCL unique id of {} bytes instead of {}: it could not make one",
                            from_root.size(), sizeof id));
  std::memcpy(&id, from_root.data(), sizeof id);
  return id;
}

struct Vote {
  std::uint64_t hash = 0;
  std::uint64_t prepared = 0;
};

[[nodiscard]] Result<void> compare(const std::vector<Vote>& votes, std::uint64_t hash) {
  for (std::size_t r = 0; r < votes.size(); ++r) {
    if (votes[r].prepared == 0)
      return fail(ErrorCode::kPeerFailed,
                  fmt::format("communicator rank {} could not prepare its part of the plan", r));
    if (votes[r].hash != hash)
      return mismatch(
          fmt::format("communicator rank {} prepared plan {:016x}, this rank {:016x}: every rank must run "
                      "the same plan",
                      r, votes[r].hash, hash));
  }
  return {};
}

}  // namespace

Result<std::unique_ptr<Communicator>> Communicator::create(Bootstrap& bootstrap, int device,
                                                           Seconds timeout) {
  const DeviceGuard guard(device);
  REFIT_TRY(guard.status());
  auto id = REFIT_TRY(shared_id(bootstrap));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t started = ncclCommInitRankConfig(&comm, bootstrap.size(), id, bootstrap.rank(), &config);
  const auto call = fmt::format("ncclCommInitRankConfig(rank {} of {}, GPU {})", bootstrap.rank(),
                                bootstrap.size(), device);
  if (comm == nullptr) return nccl_error(started == ncclSuccess ? ncclInternalError : started, call);
  std::unique_ptr<Communicator> c(new Communicator(comm, true, timeout));
  // Not a REFIT_TRY: a communicator that did not settle is aborted before the error returns.
  if (auto ok = nccl_settle(comm, started, call, deadline_after(timeout)); !ok) {
    c->abort();
    return std::unexpected(std::move(ok).error());
  }
  REFIT_TRY(c->describe());
  return c;
}

Result<std::unique_ptr<Communicator>> Communicator::adopt(ncclComm_t comm, Seconds timeout) {
  if (comm == nullptr) return invalid("the NCCL communicator to adopt is null");
  std::unique_ptr<Communicator> c(new Communicator(comm, false, timeout));
  REFIT_TRY(c->describe());
  return c;
}

Result<void> Communicator::describe() {
  int rank = 0;
  int size = 0;
  REFIT_TRY(nccl_ok(ncclCommUserRank(comm_, &rank), "ncclCommUserRank", comm_));
  REFIT_TRY(nccl_ok(ncclCommCount(comm_, &size), "ncclCommCount", comm_));
  REFIT_TRY(nccl_ok(ncclCommCuDevice(comm_, &device_), "ncclCommCuDevice", comm_));
  rank_ = rank;
  size_ = size;
  return {};
}

Communicator::~Communicator() {
  if (comm_ == nullptr || aborted_ || !owned_) return;
  const DeviceGuard guard(device_);
  if (revoked_) {  // NCCL forbids finalizing a revoked communicator
    ncclCommAbort(comm_);
    return;
  }
  const auto finished =
      nccl_settle(comm_, ncclCommFinalize(comm_), "ncclCommFinalize", deadline_after(timeout_));
  if (finished)
    ncclCommDestroy(comm_);
  else
    ncclCommAbort(comm_);
}

void Communicator::abort() {
  if (comm_ == nullptr || aborted_) return;
  ncclCommAbort(comm_);
  aborted_ = true;
}

void Communicator::revoke() {
  if (comm_ == nullptr || aborted_ || revoked_) return;
  const DeviceGuard guard(device_);
  const auto started = ncclCommRevoke(comm_, NCCL_REVOKE_DEFAULT);
  if (started == ncclSuccess || started == ncclInProgress)
    revoked_ = true;
  else
    abort();
}

Result<void> Communicator::shrink(std::span<const std::int32_t> exclude) {
  if (aborted_) return fail(ErrorCode::kRuntime, "an aborted NCCL communicator cannot be shrunk");
  const DeviceGuard guard(device_);
  REFIT_TRY(guard.status());
  ncclResult_t async = ncclSuccess;
  REFIT_TRY(nccl_ok(ncclCommGetAsyncError(comm_, &async), "ncclCommGetAsyncError", comm_));
  const bool stuck = revoked_ || async != ncclSuccess;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  config.shrinkShare = stuck ? 0 : 1;
  std::vector<int> list(exclude.begin(), exclude.end());
  ncclComm_t child = nullptr;
  const auto call = fmt::format("ncclCommShrink(excluding {} of {} ranks{})", list.size(), size_,
                                stuck ? ", aborting the parent's operations" : "");
  const ncclResult_t started = ncclCommShrink(comm_, list.data(), static_cast<int>(list.size()), &child,
                                              &config, stuck ? NCCL_SHRINK_ABORT : NCCL_SHRINK_DEFAULT);
  if (child == nullptr) return nccl_error(started == ncclSuccess ? ncclInternalError : started, call, comm_);
  if (auto ok = nccl_settle(child, started, call, deadline_after(timeout_)); !ok) {
    ncclCommAbort(child);
    return ok;
  }
  if (owned_) {
    if (stuck || !nccl_settle(comm_, ncclCommFinalize(comm_), "ncclCommFinalize", deadline_after(timeout_)))
      ncclCommAbort(comm_);
    else
      ncclCommDestroy(comm_);
  }
  comm_ = child;
  owned_ = true;
  revoked_ = false;
  return describe();
}

Result<void> Communicator::agree(std::uint64_t plan_hash, bool prepared, Seconds timeout,
                                 OnFailure on_failure) {
  const DeviceGuard guard(device_);
  REFIT_TRY(guard.status());
  const Vote mine{.hash = plan_hash, .prepared = prepared ? 1u : 0u};
  std::vector<Vote> votes(static_cast<std::size_t>(size_));
  Stream stream;
  DeviceMemory buffer;
  REFIT_TRY(stream.create());
  REFIT_TRY(buffer.allocate(sizeof(Vote) * (votes.size() + 1), "cudaMalloc (plan votes)"));
  auto* all = buffer.get() + sizeof(Vote);
  REFIT_TRY(upload(buffer.get(), &mine, sizeof mine, "cudaMemcpy (vote)"));
  const auto deadline = deadline_after(timeout);
  auto done = nccl_settle(comm_, ncclAllGather(buffer.get(), all, 2, ncclUint64, comm_, stream.get()),
                          "ncclAllGather (plan hashes)", deadline);
  if (done) done = wait_stream(stream.get(), comm_, "the allgather of plan hashes", deadline);
  // Not a REFIT_TRY: the communicator is given up before the error returns.
  if (!done) {
    give_up(on_failure);
    return done;
  }
  REFIT_TRY(cuda_ok(cudaMemcpy(votes.data(), all, sizeof(Vote) * votes.size(), cudaMemcpyDeviceToHost),
                    "cudaMemcpy (votes)"));
  return compare(votes, plan_hash);
}

Result<std::int32_t> host_local_rank(Bootstrap& bootstrap) {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return fail(ErrorCode::kRuntime, "gethostname failed");
  const auto all = REFIT_TRY_IN(bootstrap.allgather(name.data()), "allgather of host names");
  std::int32_t local = 0;
  for (std::int32_t r = 0; r < bootstrap.rank(); ++r)
    if (all[static_cast<std::size_t>(r)] == name.data()) ++local;
  return local;
}

}  // namespace refit::nccl_detail
