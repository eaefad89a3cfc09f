#pragma once
// Runs independent pieces of a use case side by side (a sweep's points, a comparison's
// strategies): each piece writes only its own result, so nothing but the index is shared.
#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <mutex>
#include <system_error>
#include <thread>
#include <vector>

namespace refit::detail {

// The threads `jobs` asks for: itself when positive, else one per core.
inline std::size_t threads_for(std::int32_t jobs) {
  return jobs > 0 ? static_cast<std::size_t>(jobs) : std::max(1u, std::thread::hardware_concurrency());
}

// Calls work(i) for every i in [0, count), on up to `threads` threads (this one among them), each
// taking the next index as it finishes the last. Where the system refuses a thread, the threads
// there take every index. The first exception a call throws (out of memory, say) stops the
// others taking more and is thrown here once all have stopped, instead of ending the process.
template <class Work>
void in_parallel(std::size_t count, std::size_t threads, const Work& work) {
  std::atomic<std::size_t> next{0};
  std::mutex failed_mutex;
  std::exception_ptr failed;
  const auto take = [&] {
    try {
      for (std::size_t i; (i = next++) < count;) work(i);
    } catch (...) {
      const std::scoped_lock lock(failed_mutex);
      if (!failed) failed = std::current_exception();
      next = count;
    }
  };
  {
    std::vector<std::jthread> helpers;
    helpers.reserve(std::min(threads, count));
    for (std::size_t t = 1; t < std::min(threads, count); ++t) {
      try {
        helpers.emplace_back(take);
      } catch (const std::system_error&) {
        break;
      }
    }
    take();
  }
  if (failed) std::rethrow_exception(failed);
}

}  // namespace refit::detail
