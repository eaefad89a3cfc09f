// simulate() rejects models it cannot run, naming the task or resource at fault.
#include <cmath>
#include <limits>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/simulator/simulate.h"

namespace refit::sim {
namespace {

using ::testing::HasSubstr;

// The message of the error simulate() gives, which must be of kind `code`.
std::string error_of(const Model& m, ErrorCode code, const SimulateOptions& options = {}) {
  const auto r = simulate(m, options);
  EXPECT_FALSE(r.has_value());
  if (r) return {};
  EXPECT_EQ(r.error().code, code) << r.error().message;
  return r.error().message;
}

TEST(SimulateErrors, DependencyCycleNamesATaskOnIt) {
  // a -> b -> c -> b: b and c form the cycle; a only waits on it.
  Model m;
  m.add_task({.label = "a"});
  m.add_task({.deps = {TaskId{2}}, .label = "b"});
  m.add_task({.deps = {TaskId{1}, TaskId{0}}, .label = "c"});
  m.add_task({.deps = {TaskId{2}}, .label = "after"});
  const auto message = error_of(m, ErrorCode::kInvalidArgument);
  EXPECT_THAT(message, HasSubstr("dependency cycle"));
  EXPECT_THAT(message, ::testing::AnyOf(HasSubstr("task 1 'b'"), HasSubstr("task 2 'c'")));
  EXPECT_THAT(message, ::testing::AnyOf(HasSubstr("1 -> 2 -> 1"), HasSubstr("2 -> 1 -> 2")));
}

TEST(SimulateErrors, SelfDependencyIsACycle) {
  Model m;
  m.add_task({.deps = {TaskId{0}}});
  EXPECT_THAT(error_of(m, ErrorCode::kInvalidArgument), HasSubstr("task 0: dependency cycle 0 -> 0"));
}

TEST(SimulateErrors, UnknownDependency) {
  Model m;
  m.add_task({.deps = {TaskId{7}}, .label = "x"});
  EXPECT_THAT(error_of(m, ErrorCode::kNotFound), HasSubstr("task 0 'x': depends on unknown task 7"));
}

TEST(SimulateErrors, CapacityMustBePositive) {
  Model m;
  m.add_resource("ok", BytesPerSecond{1});
  m.add_resource("nic 3 rx", BytesPerSecond{0});
  EXPECT_THAT(error_of(m, ErrorCode::kOutOfRange),
              HasSubstr("resource 1 'nic 3 rx': capacity must be positive"));
  Model negative;
  negative.add_resource("nvlink", BytesPerSecond{-5});
  EXPECT_THAT(error_of(negative, ErrorCode::kOutOfRange), HasSubstr("'nvlink'"));
}

TEST(SimulateErrors, BadTaskFields) {
  Model m;
  const auto l = m.add_resource("l", BytesPerSecond{1});
  m.add_task({.bytes = Bytes{-1}, .resources = {l}});
  EXPECT_THAT(error_of(m, ErrorCode::kOutOfRange), HasSubstr("task 0: negative byte count -1"));

  Model no_resource;
  no_resource.add_task({.bytes = Bytes{10}, .label = "lost"});
  EXPECT_THAT(error_of(no_resource, ErrorCode::kInvalidArgument),
              HasSubstr("task 0 'lost': moves 10 bytes but crosses no resource"));

  Model unknown_resource;
  unknown_resource.add_task({.bytes = Bytes{10}, .resources = {ResourceId{4}}});
  EXPECT_THAT(error_of(unknown_resource, ErrorCode::kNotFound), HasSubstr("unknown resource 4"));

  Model bad_latency;
  bad_latency.add_task({.latency = Seconds{-1}});
  EXPECT_THAT(error_of(bad_latency, ErrorCode::kOutOfRange),
              HasSubstr("latency must be finite and not negative"));

  Model bad_track;
  bad_track.add_task({.track = 3});
  EXPECT_THAT(error_of(bad_track, ErrorCode::kNotFound), HasSubstr("unknown track 3"));
}

TEST(SimulateErrors, RateToleranceAndInstantAreFractionsBelowOne) {
  Model m;
  m.add_task({});
  for (const double bad : {-1e-3, 1.0, std::nan("")}) {
    SimulateOptions tolerance;
    tolerance.rate_tolerance = bad;
    EXPECT_THAT(error_of(m, ErrorCode::kOutOfRange, tolerance),
                HasSubstr("rate_tolerance must be in [0, 1)"));
    SimulateOptions instant;
    instant.instant = bad;
    EXPECT_THAT(error_of(m, ErrorCode::kOutOfRange, instant), HasSubstr("instant must be in [0, 1)"));
  }
}

// A stream's task starts after the one added before it: waiting on a later one never ends.
TEST(SimulateErrors, WaitingOnALaterTaskOfTheSameStreamIsACycle) {
  Model m;
  const auto s = m.add_stream();
  m.add_task({.deps = {TaskId{1}}, .label = "first", .stream = s});
  m.add_task({.stream = s});
  EXPECT_THAT(error_of(m, ErrorCode::kInvalidArgument), HasSubstr("dependency cycle"));
}

TEST(SimulateErrors, UnknownStream) {
  Model m;
  m.add_task({.label = "x", .stream = 3});
  EXPECT_THAT(error_of(m, ErrorCode::kNotFound), HasSubstr("task 0 'x': unknown stream 3"));
}

TEST(SimulateErrors, AStreamAddedAfterItsTaskIsRefused) {
  Model m;
  m.add_task({.label = "early", .stream = 0});
  m.add_stream();
  EXPECT_THAT(error_of(m, ErrorCode::kInvalidArgument),
              HasSubstr("task 0 'early': joins stream 0, which was added after it"));
}

TEST(SimulateErrors, AStreamsShareWeightMustBePositive) {
  for (const double weight : {0.0, -1.0, std::numeric_limits<double>::infinity()}) {
    Model m;
    const auto r = m.add_resource("nic", BytesPerSecond{1e9});
    m.add_task({.bytes = Bytes{1}, .resources = {r}, .label = "x", .stream = m.add_stream(weight)});
    EXPECT_THAT(error_of(m, ErrorCode::kOutOfRange),
                HasSubstr("task 0 'x': stream 0 must have a positive, finite share weight"));
  }
}

}  // namespace
}  // namespace refit::sim
