#pragma once
// Bootstrap over MPI: `refit run` is started with mpirun, so the ranks already know each other.
// The program calls MPI_Init before constructing it and MPI_Finalize after destroying it.
#include <mpi.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "refit/executors/bootstrap.h"

namespace refit {

class MpiBootstrap final : public Bootstrap {
 public:
  // Works on a private duplicate of `comm`, with errors returned rather than fatal, so refit's
  // traffic never mixes with the caller's and an MPI failure becomes an Error.
  static Result<MpiBootstrap> create(MPI_Comm comm = MPI_COMM_WORLD);
  MpiBootstrap(MpiBootstrap&& other) noexcept;
  MpiBootstrap& operator=(MpiBootstrap&&) = delete;
  MpiBootstrap(const MpiBootstrap&) = delete;
  ~MpiBootstrap() override;

  std::int32_t rank() const override { return rank_; }
  std::int32_t size() const override { return size_; }
  Result<std::vector<std::string>> allgather(std::string_view mine) override;
  Result<void> barrier() override;

 private:
  MpiBootstrap(MPI_Comm comm, std::int32_t rank, std::int32_t size) : comm_(comm), rank_(rank), size_(size) {}
  MPI_Comm comm_ = MPI_COMM_NULL;
  std::int32_t rank_ = 0;
  std::int32_t size_ = 0;
};

}  // namespace refit
