#pragma once
// The NCCL communicator of an executor: created here over a Bootstrap (non-blocking, so every wait
// on it is bounded and a timeout can abort it), or adopted from the caller.
#include <cstdint>
#include <memory>
#include <span>

#include <nccl.h>

#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/executors/bootstrap.h"

namespace refit::nccl_detail {

// What a failure does to the communicator: abort it (a refit over fixed ranks, which every rank
// fails), or revoke it, keeping it for a shrink without the dead ranks (an elastic step).
enum class OnFailure : std::uint8_t { kAbort, kRevoke };

class Communicator {
 public:
  // Rank 0 makes the unique id, the bootstrap's allgather hands it to all; every rank then joins
  // within `timeout` or the communicator is aborted.
  [[nodiscard]] static Result<std::unique_ptr<Communicator>> create(Bootstrap& bootstrap, int device,
                                                                    Seconds timeout);
  [[nodiscard]] static Result<std::unique_ptr<Communicator>> adopt(ncclComm_t comm, Seconds timeout);
  ~Communicator();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  ncclComm_t get() const { return comm_; }
  std::int32_t rank() const { return rank_; }
  std::int32_t size() const { return size_; }
  int device() const { return device_; }
  bool aborted() const { return aborted_; }
  bool revoked() const { return revoked_; }
  // Ends every operation in flight on it; the communicator is unusable after.
  void abort();
  // Stops every operation in flight (ncclCommRevoke) but keeps the communicator for shrink(),
  // which is then the only call it takes; aborts it when NCCL refuses the revoke.
  void revoke();
  void give_up(OnFailure how) { how == OnFailure::kRevoke ? revoke() : abort(); }

  // Collective over the ranks that stay: replaces the communicator by its child without the
  // parent ranks `exclude` (ascending; shrink_ranks.h works them out), in place, so what holds
  // this object keeps it. When NCCL reports an asynchronous error on the parent (operations may
  // be stuck on a dead peer), or it was revoked, they are aborted first (NCCL_SHRINK_ABORT) and
  // the child shares nothing of the parent (NCCL disables sharing once revoked); otherwise the child
  // shares the parent's resources (shrinkShare). A parent this object created is then destroyed;
  // an adopted one is left to its owner. Refuses an aborted communicator, which NCCL has freed.
  [[nodiscard]] Result<void> shrink(std::span<const std::int32_t> exclude);

  // Collective: every rank contributes its plan hash and whether it could prepare; fails on every
  // rank, naming the first rank that differs (kMismatch) or failed (kPeerFailed), unless all agree
  // and all succeeded. A failure to agree (a timeout) gives the communicator up `on_failure`.
  [[nodiscard]] Result<void> agree(std::uint64_t plan_hash, bool prepared, Seconds timeout,
                                   OnFailure on_failure = OnFailure::kAbort);

 private:
  Communicator(ncclComm_t comm, bool owned, Seconds timeout)
      : comm_(comm), owned_(owned), timeout_(timeout) {}
  [[nodiscard]] Result<void> describe();

  ncclComm_t comm_ = nullptr;
  bool owned_ = false;
  bool aborted_ = false;
  bool revoked_ = false;
  Seconds timeout_;
  std::int32_t rank_ = 0;
  std::int32_t size_ = 0;
  int device_ = 0;
};

// This process's index among the bootstrap's ranks on the same host (host names allgathered).
[[nodiscard]] Result<std::int32_t> host_local_rank(Bootstrap& bootstrap);

}  // namespace refit::nccl_detail
