#pragma once
// Wall time on the monotonic clock, in the units every report and prediction uses.
#include <chrono>

#include "refit/core/units.h"

namespace refit {

using SteadyClock = std::chrono::steady_clock;

// The time from `start` to now.
inline Seconds seconds_since(SteadyClock::time_point start) {
  return Seconds{std::chrono::duration<double>(SteadyClock::now() - start).count()};
}

}  // namespace refit
