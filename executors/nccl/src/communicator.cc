#include "communicator.h"

#include <unistd.h>

#include <array>
#include <cstring>
#include <string>

#include <fmt/format.h>

#include "cuda_handles.h"
#include "cuda_status.h"

namespace refit::nccl_detail {
namespace {

Clock::time_point deadline_after(Seconds s) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s.value));
}

// Rank 0's unique id, on every rank. Rank 0 takes part in the allgather even when it could not
// make an id, so that no rank waits for it.
Result<ncclUniqueId> shared_id(Bootstrap& bootstrap) {
  ncclUniqueId id{};
  std::string mine;
  Result<void> made;
  if (bootstrap.rank() == 0) {
    made = nccl_ok(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (made) mine.assign(reinterpret_cast<const char*>(&id), sizeof id);
  }
  auto all = bootstrap.allgather(mine);
  if (!made) return std::unexpected(std::move(made.error()));
  if (!all) return std::unexpected(std::move(all.error()).in("allgather of the NCCL unique id"));
  const auto& from_root = all->front();
  if (from_root.size() != sizeof id)
    return fail(ErrorCode::kRuntime,
                fmt::format("rank 0 sent a NCCL unique id of {} bytes instead of {}: it could not make one",
                            from_root.size(), sizeof id));
  std::memcpy(&id, from_root.data(), sizeof id);
  return id;
}

struct Vote {
  std::uint64_t hash = 0;
  std::uint64_t prepared = 0;
};

Result<void> compare(const std::vector<Vote>& votes, std::uint64_t hash) {
  for (std::size_t r = 0; r < votes.size(); ++r) {
    if (votes[r].prepared == 0)
      return fail(ErrorCode::kRuntime,
                  fmt::format("communicator rank {} could not prepare its part of the plan", r));
    if (votes[r].hash != hash)
      return invalid(
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
  if (!guard.status()) return std::unexpected(guard.status().error());
  auto id = shared_id(bootstrap);
  if (!id) return std::unexpected(std::move(id.error()));
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t comm = nullptr;
  const ncclResult_t started =
      ncclCommInitRankConfig(&comm, bootstrap.size(), *id, bootstrap.rank(), &config);
  const auto call = fmt::format("ncclCommInitRankConfig(rank {} of {}, GPU {})", bootstrap.rank(),
                                bootstrap.size(), device);
  if (comm == nullptr)
    return std::unexpected(nccl_ok(started == ncclSuccess ? ncclInternalError : started, call).error());
  std::unique_ptr<Communicator> c(new Communicator(comm, true, timeout));
  if (auto ok = nccl_settle(comm, started, call, deadline_after(timeout)); !ok) {
    c->abort();
    return std::unexpected(std::move(ok.error()));
  }
  if (auto ok = c->describe(); !ok) return std::unexpected(std::move(ok.error()));
  return c;
}

Result<std::unique_ptr<Communicator>> Communicator::adopt(ncclComm_t comm, Seconds timeout) {
  if (comm == nullptr) return invalid("the NCCL communicator to adopt is null");
  std::unique_ptr<Communicator> c(new Communicator(comm, false, timeout));
  if (auto ok = c->describe(); !ok) return std::unexpected(std::move(ok.error()));
  return c;
}

Result<void> Communicator::describe() {
  int rank = 0;
  int size = 0;
  if (auto ok = nccl_ok(ncclCommUserRank(comm_, &rank), "ncclCommUserRank", comm_); !ok) return ok;
  if (auto ok = nccl_ok(ncclCommCount(comm_, &size), "ncclCommCount", comm_); !ok) return ok;
  if (auto ok = nccl_ok(ncclCommCuDevice(comm_, &device_), "ncclCommCuDevice", comm_); !ok) return ok;
  rank_ = rank;
  size_ = size;
  return {};
}

Communicator::~Communicator() {
  if (comm_ == nullptr || aborted_ || !owned_) return;
  const DeviceGuard guard(device_);
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

Result<void> Communicator::agree(std::uint64_t plan_hash, bool prepared, Seconds timeout) {
  const DeviceGuard guard(device_);
  if (!guard.status()) return guard.status();
  const Vote mine{plan_hash, prepared ? 1u : 0u};
  std::vector<Vote> votes(static_cast<std::size_t>(size_));
  Stream stream;
  DeviceMemory buffer;
  if (auto ok = stream.create(); !ok) return ok;
  if (auto ok = buffer.allocate(sizeof(Vote) * (votes.size() + 1), "cudaMalloc (plan votes)"); !ok) return ok;
  auto* all = buffer.get() + sizeof(Vote);
  if (auto ok =
          cuda_ok(cudaMemcpy(buffer.get(), &mine, sizeof mine, cudaMemcpyHostToDevice), "cudaMemcpy (vote)");
      !ok)
    return ok;
  const auto deadline = deadline_after(timeout);
  auto done = nccl_settle(comm_, ncclAllGather(buffer.get(), all, 2, ncclUint64, comm_, stream.get()),
                          "ncclAllGather (plan hashes)", deadline);
  if (done) done = wait_stream(stream.get(), comm_, "the allgather of plan hashes", deadline);
  if (!done) {
    abort();
    return done;
  }
  if (auto ok = cuda_ok(cudaMemcpy(votes.data(), all, sizeof(Vote) * votes.size(), cudaMemcpyDeviceToHost),
                        "cudaMemcpy (votes)");
      !ok)
    return ok;
  return compare(votes, plan_hash);
}

Result<std::int32_t> host_local_rank(Bootstrap& bootstrap) {
  std::array<char, 256> name{};
  if (gethostname(name.data(), name.size() - 1) != 0) return fail(ErrorCode::kRuntime, "gethostname failed");
  auto all = bootstrap.allgather(name.data());
  if (!all) return std::unexpected(std::move(all.error()).in("allgather of host names"));
  std::int32_t local = 0;
  for (std::int32_t r = 0; r < bootstrap.rank(); ++r)
    if ((*all)[static_cast<std::size_t>(r)] == name.data()) ++local;
  return local;
}

}  // namespace refit::nccl_detail
