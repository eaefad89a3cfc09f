#include "refit/executors/mpi_bootstrap.h"
#include "refit/core/elapsed.h"

#include <algorithm>
#include <chrono>
#include <limits>
#include <thread>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

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

// Tags of the two rounds of an allgather: part sizes, then parts.
constexpr int kSizeTag = 1;
constexpr int kPartTag = 2;

std::string ranks_text(const std::vector<std::int32_t>& ranks) {
  return fmt::format("{} {}", ranks.size() == 1 ? "rank" : "ranks", fmt::join(ranks, ", "));
}

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

// One round of messages: for every peer a receive from it and a send to it. Everything MPI is
// handed lives here, so that it can outlive a round that timed out.
struct MpiBootstrap::Exchange {
  std::string mine;
  std::int64_t my_size = 0;
  std::vector<std::int64_t> sizes;    // by rank
  std::vector<std::string> parts;     // by rank
  std::vector<MPI_Request> requests;  // this round's
  std::vector<std::int32_t> peer_of;  // by request
  std::vector<bool> is_receive;       // by request

  void add(MPI_Request request, std::int32_t peer, bool receive) {
    requests.push_back(request);
    peer_of.push_back(peer);
    is_receive.push_back(receive);
  }
};

Result<void> MpiBootstrap::exchange_sizes(Exchange& x) {
  for (std::int32_t peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    MPI_Request r = MPI_REQUEST_NULL;
    REFIT_TRY(
        check(MPI_Irecv(&x.sizes[static_cast<std::size_t>(peer)], 1, MPI_INT64_T, peer, kSizeTag, comm_, &r),
              "MPI_Irecv"));
    x.add(r, peer, true);
    REFIT_TRY(check(MPI_Isend(&x.my_size, 1, MPI_INT64_T, peer, kSizeTag, comm_, &r), "MPI_Isend"));
    x.add(r, peer, false);
  }
  return {};
}

Result<void> MpiBootstrap::exchange_parts(Exchange& x) {
  // MPI counts are ints: sizes travelled as 64-bit values first so that an oversized part is an
  // error rather than a wrapped count.
  for (std::int32_t peer = 0; peer < size_; ++peer) {
    const auto bytes = x.sizes[static_cast<std::size_t>(peer)];
    if (bytes < 0 || bytes > std::numeric_limits<int>::max())
      return fail(
          ErrorCode::kRuntime,
          fmt::format("rank {}'s part of an allgather, {} bytes, exceeds MPI's int counts", peer, bytes));
  }
  for (std::int32_t peer = 0; peer < size_; ++peer) {
    if (peer == rank_) continue;
    auto& part = x.parts[static_cast<std::size_t>(peer)];
    part.assign(static_cast<std::size_t>(x.sizes[static_cast<std::size_t>(peer)]), '\0');
    MPI_Request r = MPI_REQUEST_NULL;
    REFIT_TRY(
        check(MPI_Irecv(part.data(), static_cast<int>(part.size()), MPI_BYTE, peer, kPartTag, comm_, &r),
              "MPI_Irecv"));
    x.add(r, peer, true);
    REFIT_TRY(
        check(MPI_Isend(x.mine.data(), static_cast<int>(x.my_size), MPI_BYTE, peer, kPartTag, comm_, &r),
              "MPI_Isend"));
    x.add(r, peer, false);
  }
  return {};
}

Result<void> MpiBootstrap::complete(Exchange& x, std::string_view what) {
  const auto deadline = SteadyClock::now() + to_duration(timeout_);
  for (auto pause = kFirstPoll;; pause = std::min(pause * 2, kLongestPoll)) {
    bool pending = false;
    for (std::size_t i = 0; i < x.requests.size(); ++i) {
      if (x.requests[i] == MPI_REQUEST_NULL) continue;
      int done = 0;
      // The context is formatted only on failure: this loop runs at every poll.
      if (const int code = MPI_Test(&x.requests[i], &done, MPI_STATUS_IGNORE); code != MPI_SUCCESS)
        return check(code, fmt::format("the {} {} rank {}", what,
                                       x.is_receive[i] ? "message from" : "message to", x.peer_of[i]));
      pending = pending || !done;
    }
    if (!pending) {
      x.requests.clear();
      x.peer_of.clear();
      x.is_receive.clear();
      return {};
    }
    if (std::chrono::steady_clock::now() >= deadline) return timed_out(x, what);
    std::this_thread::sleep_for(pause);
  }
}

Result<void> MpiBootstrap::timed_out(const Exchange& x, std::string_view what) const {
  std::vector<std::int32_t> unheard;  // peers whose part has not arrived
  std::vector<std::int32_t> untaken;  // peers that have not taken this rank's part
  for (std::size_t i = 0; i < x.requests.size(); ++i)
    if (x.requests[i] != MPI_REQUEST_NULL) (x.is_receive[i] ? unheard : untaken).push_back(x.peer_of[i]);
  if (!unheard.empty())
    return fail(ErrorCode::kTimeout,
                fmt::format("{} did not reach the bootstrap's {} within {:.1f} s: {} or hangs before it",
                            ranks_text(unheard), what, timeout_.value,
                            unheard.size() == 1 ? "it died" : "they died"));
  return fail(
      ErrorCode::kTimeout,
      fmt::format("{} did not take this rank's part of the bootstrap's {} within {:.1f} s: {} or hangs",
                  ranks_text(untaken), what, timeout_.value, untaken.size() == 1 ? "it died" : "they died"));
}

Result<std::vector<std::string>> MpiBootstrap::gather(std::string_view mine, std::string_view what) {
  if (broken())
    return fail(ErrorCode::kRuntime, "the MPI bootstrap is broken: an earlier collective timed out");
  auto x = std::make_shared<Exchange>();
  x->mine = mine;
  x->my_size = static_cast<std::int64_t>(mine.size());
  x->sizes.assign(static_cast<std::size_t>(size_), 0);
  x->sizes[static_cast<std::size_t>(rank_)] = x->my_size;
  x->parts.resize(static_cast<std::size_t>(size_));
  auto rounds = [&]() -> Result<void> {
    REFIT_TRY(exchange_sizes(*x));
    REFIT_TRY(complete(*x, what));
    if (std::ranges::all_of(x->sizes, [](std::int64_t s) { return s == 0; })) return {};
    REFIT_TRY(exchange_parts(*x));
    return complete(*x, what);
  };
  if (auto done = rounds(); !done) {
    // Requests may still be pending: MPI may write into x later, and the communicator cannot be
    // used or freed.
    broken_ = true;
    abandoned_buffers_ = x;
    return std::unexpected(std::move(done).error());
  }
  x->parts[static_cast<std::size_t>(rank_)] = std::move(x->mine);
  return std::move(x->parts);
}

Result<std::vector<std::string>> MpiBootstrap::allgather(std::string_view mine) {
  return gather(mine, "allgather");
}

Result<void> MpiBootstrap::barrier() {
  REFIT_TRY(gather({}, "barrier"));
  return {};
}

}  // namespace refit
