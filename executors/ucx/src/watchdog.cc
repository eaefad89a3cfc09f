#include "watchdog.h"

#include <algorithm>

#include "refit/core/elapsed.h"

namespace refit::ucx_detail {
namespace {

constexpr int kHeartbeatsPerTimeout = 10;
constexpr std::chrono::milliseconds kMinSleep{1};

}  // namespace

Watchdog::Watchdog(Seconds timeout, Clock::time_point start)
    : timeout_(to_duration(timeout)),
      heartbeat_period_(timeout_ / kHeartbeatsPerTimeout),
      last_progress_(start),
      next_heartbeat_(start) {}

std::chrono::milliseconds Watchdog::next_wake(Clock::time_point now) const {
  const auto until = std::min(next_heartbeat_, last_progress_ + timeout_) - now;
  return std::max(kMinSleep, std::chrono::ceil<std::chrono::milliseconds>(until));
}

double Watchdog::seconds_since_progress(Clock::time_point now) const {
  return std::chrono::duration<double>(now - last_progress_).count();
}

}  // namespace refit::ucx_detail
