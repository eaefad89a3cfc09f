#pragma once
// ExecutorOptions::interrupted as an executor's wait loop asks it: at most every kInterruptPoll
// (the question may take the GIL in a Python job), and one error text for every executor.
#include <chrono>
#include <functional>

#include "refit/core/error.h"

namespace refit {

class InterruptCheck {
 public:
  using Clock = std::chrono::steady_clock;
  explicit InterruptCheck(std::function<bool()> interrupted) : interrupted_(std::move(interrupted)) {}

  // Whether anything is asked at all: a waiter without it may sleep as long as it likes.
  bool armed() const { return static_cast<bool>(interrupted_); }
  // An error once `interrupted` said true; asks it only when kInterruptPoll has passed since the
  // last time.
  [[nodiscard]] Result<void> poll(Clock::time_point now);

 private:
  std::function<bool()> interrupted_;
  Clock::time_point next_{};
};

}  // namespace refit
