#pragma once
// Ranks as threads of one process: a Bootstrap over shared memory, so executor tests run many
// ranks without mpirun. Each rank's thread owns its executor (and its UCX worker).
#include <condition_variable>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "refit/executors/bootstrap.h"

namespace refit::testing {

class ThreadGroup {
 public:
  explicit ThreadGroup(std::int32_t size) : size_(size), slots_(static_cast<std::size_t>(size)) {}
  std::int32_t size() const { return size_; }

  std::vector<std::string> allgather(std::int32_t rank, std::string_view mine) {
    std::unique_lock lock(mutex_);
    const auto generation = generation_;
    slots_[static_cast<std::size_t>(rank)] = std::string(mine);
    if (++arrived_ == size_) {
      result_ = slots_;
      arrived_ = 0;
      ++generation_;
      changed_.notify_all();
    } else {
      changed_.wait(lock, [&] { return generation_ != generation; });
    }
    return result_;
  }

 private:
  std::int32_t size_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::vector<std::string> slots_;
  std::vector<std::string> result_;
  std::int32_t arrived_ = 0;
  std::uint64_t generation_ = 0;
};

class ThreadBootstrap final : public Bootstrap {
 public:
  ThreadBootstrap(ThreadGroup& group, std::int32_t rank) : group_(group), rank_(rank) {}
  std::int32_t rank() const override { return rank_; }
  std::int32_t size() const override { return group_.size(); }
  [[nodiscard]] Result<std::vector<std::string>> allgather(std::string_view mine) override {
    return group_.allgather(rank_, mine);
  }
  [[nodiscard]] Result<void> barrier() override {
    group_.allgather(rank_, {});
    return {};
  }

 private:
  ThreadGroup& group_;
  std::int32_t rank_;
};

// Runs body(rank, bootstrap) on one thread per rank and waits for all of them.
inline void run_ranks(std::int32_t size, const std::function<void(std::int32_t, Bootstrap&)>& body) {
  ThreadGroup group(size);
  std::vector<std::thread> threads;
  for (std::int32_t r = 0; r < size; ++r)
    threads.emplace_back([&, r] {
      ThreadBootstrap bootstrap(group, r);
      body(r, bootstrap);
    });
  for (auto& t : threads) t.join();
}

}  // namespace refit::testing
