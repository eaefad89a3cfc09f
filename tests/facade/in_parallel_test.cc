// detail::in_parallel (facade/src/in_parallel.h): every index once, whatever the threads; an
// exception from one call comes out of in_parallel once every thread has stopped, instead of
// ending the process from a helper thread.
#include "in_parallel.h"

#include <atomic>
#include <stdexcept>
#include <vector>

#include <gtest/gtest.h>

namespace refit {
namespace {

TEST(InParallel, EveryIndexIsTakenOnceWhateverTheThreads) {
  // 1 thread, fewer than the indices, and more than the indices (only 100 are started).
  for (const std::size_t threads : {1u, 3u, 200u}) {
    std::vector<std::atomic<int>> taken(100);
    detail::in_parallel(taken.size(), threads, [&](std::size_t i) { ++taken[i]; });
    for (std::size_t i = 0; i < taken.size(); ++i) EXPECT_EQ(taken[i], 1) << "index " << i << ", " << threads;
  }
}

TEST(InParallel, AThrowingCallIsRethrownHereAfterEveryThreadStopped) {
  // Index 7 throws; every call counts itself in and out, so once in_parallel has thrown no call
  // may still be running (a helper still at work would be a thread outliving its caller's data).
  std::atomic<int> running{0};
  std::atomic<int> calls{0};
  const auto work = [&](std::size_t i) {
    ++running;
    ++calls;
    if (i == 7) {
      --running;
      throw std::runtime_error("index 7");
    }
    --running;
  };
  EXPECT_THROW(detail::in_parallel(1000, 4, work), std::runtime_error);
  EXPECT_EQ(running, 0);
  EXPECT_GE(calls, 8);  // indices are taken in order: 0..7 at least
}

}  // namespace
}  // namespace refit
