#pragma once
// Bounds every wait of an execution by ExecutorOptions::timeout.
//  - A peer that sends nothing at all, not even a heartbeat, for the timeout is taken for dead
//    or hung; the error names it.
//  - A rank that makes no progress for the timeout gives up, naming what it waited for.
// Heartbeats go to every peer ten times per timeout, so a live peer that is busy or itself
// waiting is never mistaken for a dead one: a dead peer's silence is what every other rank
// notices first, and each of them names that peer.
#include <chrono>

#include "refit/core/units.h"
#include "wire.h"

namespace refit::ucx_detail {

class Watchdog {
 public:
  static constexpr int kQuietHeartbeats = 3;

  Watchdog(Seconds timeout, Clock::time_point start);

  void progressed(Clock::time_point now) { last_progress_ = now; }
  bool heartbeat_due(Clock::time_point now) const { return now >= next_heartbeat_; }
  void heartbeat_sent(Clock::time_point now) { next_heartbeat_ = now + heartbeat_period_; }
  bool stalled(Clock::time_point now) const { return now - last_progress_ >= timeout_; }
  bool silent(Clock::time_point last_heard, Clock::time_point now) const {
    return now - last_heard >= timeout_;
  }
  // Missed a few heartbeats: not yet taken for dead, but worth naming when progress stops.
  bool quiet(Clock::time_point last_heard, Clock::time_point now) const {
    return now - last_heard >= kQuietHeartbeats * heartbeat_period_;
  }
  // How long the executing thread may sleep: until the next heartbeat or the stall deadline.
  std::chrono::milliseconds next_wake(Clock::time_point now) const;
  double seconds_since_progress(Clock::time_point now) const;

 private:
  Clock::duration timeout_;
  Clock::duration heartbeat_period_;
  Clock::time_point last_progress_;
  Clock::time_point next_heartbeat_;
};

}  // namespace refit::ucx_detail
