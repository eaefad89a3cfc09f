#include "refit/executors/interrupt_check.h"

#include "refit/executors/executor.h"

namespace refit {

Result<void> InterruptCheck::poll(Clock::time_point now) {
  if (!interrupted_ || now < next_) return {};
  next_ = now + kInterruptPoll;
  if (interrupted_())
    return fail(ErrorCode::kRuntime, "interrupted: the process was asked to stop (SIGINT) while executing");
  return {};
}

}  // namespace refit
