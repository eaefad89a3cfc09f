#pragma once
// Bootstrap over MPI: `refit run` is started with mpirun, so the ranks already know each other.
// The program calls MPI_Init before constructing it and MPI_Finalize after destroying it.
#include <mpi.h>

#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/units.h"
#include "refit/executors/bootstrap.h"

namespace refit {

class MpiBootstrap final : public Bootstrap {
 public:
  // Works on a private duplicate of `comm`, with errors returned rather than fatal, so refit's
  // traffic never mixes with the caller's and an MPI failure becomes an Error. A collective that
  // has not completed after `timeout` (a rank died or hangs before reaching it) fails with
  // kTimeout naming the ranks it did not hear from; the bootstrap is then broken() and refuses
  // further collectives. Collectives are point-to-point messages between every pair of ranks
  // (each rank's part to every peer) rather than MPI's collectives, because only then does a
  // rank know which peers never arrived.
  [[nodiscard]] static Result<MpiBootstrap> create(MPI_Comm comm = MPI_COMM_WORLD,
                                                   Seconds timeout = Seconds{
                                                       std::numeric_limits<double>::infinity()});
  MpiBootstrap(MpiBootstrap&& other) noexcept;
  MpiBootstrap& operator=(MpiBootstrap&&) = delete;
  MpiBootstrap(const MpiBootstrap&) = delete;
  ~MpiBootstrap() override;

  std::int32_t rank() const override { return rank_; }
  std::int32_t size() const override { return size_; }
  [[nodiscard]] Result<std::vector<std::string>> allgather(std::string_view mine) override;
  [[nodiscard]] Result<void> barrier() override;
  // A collective timed out: MPI may still write into its buffers (kept alive here) and the
  // communicator cannot be used or freed; the process should exit without MPI_Finalize.
  bool broken() const { return broken_; }

 private:
  MpiBootstrap(MPI_Comm comm, std::int32_t rank, std::int32_t size, Seconds timeout)
      : comm_(comm), rank_(rank), size_(size), timeout_(timeout) {}
  struct Exchange;
  // An allgather, which a barrier is too (of nothing); `what` names it in errors.
  [[nodiscard]] Result<std::vector<std::string>> gather(
      std::string_view mine,
      std::string_view what);  // one round of messages with every peer, and what MPI writes into
  // Sends this rank's size and receives every peer's, then (unless every part is empty) the parts.
  [[nodiscard]] Result<void> exchange_sizes(Exchange& x);
  [[nodiscard]] Result<void> exchange_parts(Exchange& x);
  // Waits for every request of `x` until the timeout; the error names the peers not heard from.
  [[nodiscard]] Result<void> complete(Exchange& x, std::string_view what);
  // The kTimeout error of `x`: the peers whose part never arrived, or that never took ours.
  [[nodiscard]] Result<void> timed_out(const Exchange& x, std::string_view what) const;

  MPI_Comm comm_ = MPI_COMM_NULL;
  std::int32_t rank_ = 0;
  std::int32_t size_ = 0;
  Seconds timeout_;
  bool broken_ = false;
  std::shared_ptr<void> abandoned_buffers_;  // what a timed-out collective may still write into
};

}  // namespace refit
