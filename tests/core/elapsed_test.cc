#include "refit/core/elapsed.h"

#include <limits>

#include <gtest/gtest.h>

namespace refit {
namespace {

TEST(Elapsed, ADurationIsTheSecondsInTicksAndForeverAtMost) {
  using std::chrono::milliseconds;
  EXPECT_EQ(to_duration(Seconds{1.5}), std::chrono::duration_cast<SteadyClock::duration>(milliseconds{1500}));
  EXPECT_EQ(to_duration(Seconds{0}), SteadyClock::duration::zero());
  // An infinite timeout (MpiBootstrap's default) or a NaN is a deadline never met, not undefined
  // behaviour, and now + it stays on the clock.
  const auto forever = to_duration(kForever);
  EXPECT_EQ(to_duration(Seconds{std::numeric_limits<double>::infinity()}), forever);
  EXPECT_EQ(to_duration(Seconds{std::numeric_limits<double>::quiet_NaN()}), forever);
  EXPECT_EQ(to_duration(Seconds{-std::numeric_limits<double>::infinity()}), -forever);
  EXPECT_GT(SteadyClock::now() + forever, SteadyClock::now());
}

TEST(Elapsed, SecondsBetweenTwoTimesIsTheirDifference) {
  const auto start = SteadyClock::now();
  EXPECT_DOUBLE_EQ(seconds_between(start, start + std::chrono::milliseconds{250}).value, 0.25);
  EXPECT_DOUBLE_EQ(seconds_between(start, start).value, 0.0);
}

}  // namespace
}  // namespace refit
