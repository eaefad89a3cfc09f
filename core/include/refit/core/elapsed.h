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

// The time from `from` to `to`.
inline Seconds seconds_between(SteadyClock::time_point from, SteadyClock::time_point to) {
  return Seconds{std::chrono::duration<double>(to - from).count()};
}

// The longest wait to_duration gives: about 31 years, so that now + it stays on the clock (whose
// ticks overflow some 292 years out) and an infinite timeout is a deadline never met.
inline constexpr Seconds kForever{1e9};

// `s` as the clock's duration (toward zero), for deadlines and waits; within +-kForever, which an
// infinite or NaN `s` is (converting either to ticks is undefined).
inline SteadyClock::duration to_duration(Seconds s) {
  const double seconds =
      s.value < kForever.value ? (s.value > -kForever.value ? s.value : -kForever.value) : kForever.value;
  return std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(seconds));
}

}  // namespace refit
