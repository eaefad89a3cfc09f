#pragma once
// The NCCL executor: moves a plan's bytes between GPUs with grouped ncclSend/ncclRecv on CUDA
// streams, packing strided boxes into staging with batched copy kernels (a chunk that is one
// contiguous run of a buffer goes without a copy). Relays forward a chunk once it has arrived.
// Every wait is bounded by ExecutorOptions::timeout: then the communicator is aborted and every
// surviving rank gets an error naming its step, peers and transfers.
//
// Buffers are CUDA device memory on the communicator's GPU, or host memory, which the executor
// mirrors on the GPU: sources are uploaded at the start of every execute() and destinations
// downloaded at its end (outside ExecutionReport::elapsed; `refit run` works this way).
// prepare() is collective: every process of the communicator calls it with the same plan (the
// plan hashes are compared), and a rank that fails to prepare makes every rank fail.
#include <memory>
#include <optional>
#include <span>
#include <string_view>

#include <nccl.h>

#include "refit/executors/bootstrap.h"
#include "refit/executors/executor.h"
#include "refit/executors/nccl/local_ranks.h"

namespace refit {

namespace nccl_detail {
class Communicator;
class NcclPrepared;
}  // namespace nccl_detail

// The GPU of a process: its rank among the bootstrap's ranks on the same host, modulo the
// visible GPUs.
inline constexpr int kDeviceOfHostRank = -1;

struct NcclSetup {
  int device = kDeviceOfHostRank;
  CommRankMap comm_rank_of;  // empty: plan rank r is bootstrap rank r
};

class NcclExecutor final : public Executor {
 public:
  // A new communicator over the bootstrap's processes (rank 0's unique id, allgathered), created
  // non-blocking so that a rank that never joins costs a timeout, not a hang.
  [[nodiscard]] static Result<std::unique_ptr<NcclExecutor>> create(Bootstrap& bootstrap,
                                                                    const ExecutorOptions& options,
                                                                    NcclSetup setup = {});
  // Runs on the caller's communicator, which must outlive the executor. Prefer one created with
  // config.blocking = 0: on a blocking communicator NCCL may hold the host inside a call that no
  // timeout reaches. After a timeout or failure the communicator is aborted (ncclCommAbort) and
  // must not be used, nor destroyed, again.
  [[nodiscard]] static Result<std::unique_ptr<NcclExecutor>> adopt(ncclComm_t comm,
                                                                   const ExecutorOptions& options,
                                                                   CommRankMap comm_rank_of = {});
  ~NcclExecutor() override;

  std::string_view name() const override { return "nccl"; }
  // The CUDA device of its communicator: where its kernels and buffers are.
  int device() const;
  ExecutorCapabilities capabilities() const override {
    return {.host_memory = true, .cuda_memory = true, .quantizes_at_senders = true};
  }
  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare(const Plan& plan, Rank rank,
                                                              const RankBuffers& buffers) override;
  // For a process that runs several plan ranks: all those comm_rank_of maps to it, at once.
  [[nodiscard]] Result<std::unique_ptr<PreparedPlan>> prepare_ranks(
      const Plan& plan, std::span<const LocalRankBuffers> ranks) override;
  // The prepared plan must come from this executor; it can be executed again (every refit step).
  [[nodiscard]] Result<ExecutionReport> execute(PreparedPlan& prepared) override;
  // Elastic refit between steps (docs/elastic.md): the executions that follow run the step's
  // plan over the member engines (member_step.h), derived from the prepared plan without a new
  // prepare; the first execution of a membership builds its program and staging once, and every
  // process of the communicator (a non-member too, which then moves nothing) agrees on it and
  // its epoch before any byte moves. The report's `engines` says which members complete. A step
  // over a membership that fails (a timeout, a dead peer) revokes the communicator instead of
  // aborting it: every survivor then names the dead ranks with exclude_gone and executes again,
  // which runs the step for the survivors, the dead ranks' engines reported missed.
  [[nodiscard]] Result<void> set_membership(const EngineMembership& membership) override;
  // Collective over the processes that stay: the communicator is shrunk without the processes
  // that run the plan ranks `gone` (known dead, from whatever launched them: the executor cannot
  // tell a dead peer from a stuck one; ncclCommShrink), for membership `epoch`. Their
  // engines miss every later step, and a process excluded here has no rank in the shrunk
  // communicator, so it can neither send to nor receive from any process of the new membership.
  // Executions then need a membership (the full plan's program names the old ranks).
  [[nodiscard]] Result<void> exclude_gone(std::span<const std::int32_t> gone, std::uint64_t epoch);

 private:
  NcclExecutor(std::unique_ptr<nccl_detail::Communicator> comm, const ExecutorOptions& options,
               CommRankMap map);

  [[nodiscard]] Result<ExecutionReport> execute_members(nccl_detail::NcclPrepared& prepared);

  std::unique_ptr<nccl_detail::Communicator> comm_;
  ExecutorOptions options_;
  CommRankMap comm_rank_of_;
  std::optional<EngineMembership> membership_;
  std::int32_t shrinks_ = 0;  // how often the communicator was shrunk: programs of before are stale
};

}  // namespace refit
