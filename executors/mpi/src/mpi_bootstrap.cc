#include "refit/executors/mpi_bootstrap.h"

#include <limits>
#include <numeric>
#include <utility>

#include <fmt/format.h>

namespace refit {
namespace {

Result<void> check(int code, std::string_view call) {
  if (code == MPI_SUCCESS) return {};
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return fail(ErrorCode::kRuntime,
              fmt::format("{} failed: {}", call, std::string_view(text, static_cast<std::size_t>(length))));
}

}  // namespace

Result<MpiBootstrap> MpiBootstrap::create(MPI_Comm comm) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return fail(ErrorCode::kRuntime, "MPI is not initialised (call MPI_Init first)");
  MPI_Comm dup = MPI_COMM_NULL;
  if (auto ok = check(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup"); !ok) return std::unexpected(ok.error());
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(dup, &rank);
  MPI_Comm_size(dup, &size);
  return MpiBootstrap(dup, rank, size);
}

MpiBootstrap::MpiBootstrap(MpiBootstrap&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)), rank_(other.rank_), size_(other.size_) {}

MpiBootstrap::~MpiBootstrap() {
  if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
}

Result<std::vector<std::string>> MpiBootstrap::allgather(std::string_view mine) {
  // MPI counts are ints: sizes travel as 64-bit values first so an oversized total is an error
  // rather than a wrapped count.
  const auto my_size = static_cast<std::int64_t>(mine.size());
  std::vector<std::int64_t> sizes(static_cast<std::size_t>(size_));
  if (auto ok = check(MPI_Allgather(&my_size, 1, MPI_INT64_T, sizes.data(), 1, MPI_INT64_T, comm_),
                      "MPI_Allgather");
      !ok)
    return std::unexpected(ok.error());
  const std::int64_t total = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
  if (total > std::numeric_limits<int>::max())
    return fail(ErrorCode::kRuntime, fmt::format("allgather of {} bytes exceeds MPI's int counts", total));
  std::vector<int> counts(sizes.begin(), sizes.end());
  std::vector<int> displacements(counts.size(), 0);
  std::exclusive_scan(counts.begin(), counts.end(), displacements.begin(), 0);
  std::string all(static_cast<std::size_t>(total), '\0');
  if (auto ok = check(MPI_Allgatherv(mine.data(), static_cast<int>(my_size), MPI_BYTE, all.data(),
                                     counts.data(), displacements.data(), MPI_BYTE, comm_),
                      "MPI_Allgatherv");
      !ok)
    return std::unexpected(ok.error());
  std::vector<std::string> out;
  out.reserve(counts.size());
  for (std::size_t r = 0; r < counts.size(); ++r)
    out.push_back(
        all.substr(static_cast<std::size_t>(displacements[r]), static_cast<std::size_t>(counts[r])));
  return out;
}

Result<void> MpiBootstrap::barrier() { return check(MPI_Barrier(comm_), "MPI_Barrier"); }

}  // namespace refit
