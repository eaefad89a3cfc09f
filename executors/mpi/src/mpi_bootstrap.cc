#include "refit/executors/mpi_bootstrap.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>
#include <thread>
#include <utility>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit {
namespace {

[[nodiscard]] Result<void> check(int code, std::string_view call) {
  if (code == MPI_SUCCESS) return {};
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  MPI_Error_string(code, text, &length);
  return fail(ErrorCode::kRuntime,
              fmt::format("{} failed: {}", call, std::string_view(text, static_cast<std::size_t>(length))));
}

// Everything an allgather hands MPI, in one block that outlives the call if it times out.
struct GatherBuffers {
  std::string mine;
  std::int64_t my_size = 0;
  std::vector<std::int64_t> sizes;
  std::vector<int> counts;
  std::vector<int> displacements;
  std::string all;
};

// Polling MPI_Test drives MPI's progress; the sleep grows so a long wait costs little CPU.
constexpr std::chrono::microseconds kFirstPoll{20};
constexpr std::chrono::microseconds kLongestPoll{2000};

}  // namespace

Result<MpiBootstrap> MpiBootstrap::create(MPI_Comm comm, Seconds timeout) {
  if (!(timeout.value > 0))
    return out_of_range(fmt::format("bootstrap timeout must be > 0 s, got {}", timeout.value));
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) return fail(ErrorCode::kRuntime, "MPI is not initialised (call MPI_Init first)");
  MPI_Comm dup = MPI_COMM_NULL;
  REFIT_TRY(check(MPI_Comm_dup(comm, &dup), "MPI_Comm_dup"));
  MPI_Comm_set_errhandler(dup, MPI_ERRORS_RETURN);
  int rank = 0;
  int size = 0;
  MPI_Comm_rank(dup, &rank);
  MPI_Comm_size(dup, &size);
  return MpiBootstrap(dup, rank, size, timeout);
}

MpiBootstrap::MpiBootstrap(MpiBootstrap&& other) noexcept
    : comm_(std::exchange(other.comm_, MPI_COMM_NULL)),
      rank_(other.rank_),
      size_(other.size_),
      timeout_(other.timeout_),
      broken_(other.broken_),
      abandoned_buffers_(std::move(other.abandoned_buffers_)) {}

MpiBootstrap::~MpiBootstrap() {
  if (comm_ != MPI_COMM_NULL && !broken()) MPI_Comm_free(&comm_);
}

Result<void> MpiBootstrap::complete(MPI_Request& request, std::string_view call,
                                    std::shared_ptr<void> buffers) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_.value);
  for (auto pause = kFirstPoll;; pause = std::min(pause * 2, kLongestPoll)) {
    int done = 0;
    REFIT_TRY(check(MPI_Test(&request, &done, MPI_STATUS_IGNORE), call));
    if (done) return {};
    if (std::chrono::steady_clock::now() >= deadline) {
      broken_ = true;
      abandoned_buffers_ = std::move(buffers);
      return fail(ErrorCode::kTimeout,
                  fmt::format("{} did not complete within {:.1f} s: a rank died or hangs before reaching it",
                              call, timeout_.value));
    }
    std::this_thread::sleep_for(pause);
  }
}

Result<std::vector<std::string>> MpiBootstrap::allgather(std::string_view mine) {
  if (broken())
    return fail(ErrorCode::kRuntime, "the MPI bootstrap is broken: an earlier collective timed out");
  auto b = std::make_shared<GatherBuffers>();
  b->mine = mine;
  // MPI counts are ints: sizes travel as 64-bit values first so an oversized total is an error
  // rather than a wrapped count.
  b->my_size = static_cast<std::int64_t>(mine.size());
  b->sizes.resize(static_cast<std::size_t>(size_));
  MPI_Request request = MPI_REQUEST_NULL;
  REFIT_TRY(
      check(MPI_Iallgather(&b->my_size, 1, MPI_INT64_T, b->sizes.data(), 1, MPI_INT64_T, comm_, &request),
            "MPI_Iallgather"));
  REFIT_TRY(complete(request, "MPI_Iallgather", b));
  const std::int64_t total = std::accumulate(b->sizes.begin(), b->sizes.end(), std::int64_t{0});
  if (total > std::numeric_limits<int>::max())
    return fail(ErrorCode::kRuntime, fmt::format("allgather of {} bytes exceeds MPI's int counts", total));
  b->counts.assign(b->sizes.begin(), b->sizes.end());
  b->displacements.assign(b->counts.size(), 0);
  std::exclusive_scan(b->counts.begin(), b->counts.end(), b->displacements.begin(), 0);
  b->all.assign(static_cast<std::size_t>(total), '\0');
  REFIT_TRY(check(MPI_Iallgatherv(b->mine.data(), static_cast<int>(b->my_size), MPI_BYTE, b->all.data(),
                                  b->counts.data(), b->displacements.data(), MPI_BYTE, comm_, &request),
                  "MPI_Iallgatherv"));
  REFIT_TRY(complete(request, "MPI_Iallgatherv", b));
  std::vector<std::string> out;
  out.reserve(b->counts.size());
  for (std::size_t r = 0; r < b->counts.size(); ++r)
    out.push_back(
        b->all.substr(static_cast<std::size_t>(b->displacements[r]), static_cast<std::size_t>(b->counts[r])));
  return out;
}

Result<void> MpiBootstrap::barrier() {
  if (broken())
    return fail(ErrorCode::kRuntime, "the MPI bootstrap is broken: an earlier collective timed out");
  MPI_Request request = MPI_REQUEST_NULL;
  REFIT_TRY(check(MPI_Ibarrier(comm_, &request), "MPI_Ibarrier"));
  return complete(request, "MPI_Ibarrier", nullptr);
}

}  // namespace refit
