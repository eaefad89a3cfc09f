// The Chrome trace: valid JSON (parsed with nlohmann_json), one complete event per tracked task
// at the simulated times, and thread_name metadata naming each track's lanes.
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_code.h"
#include "refit/simulator/trace_writer.h"

namespace refit::sim {
namespace {

struct Traced {
  Model model;
  SimulationResult result;
  nlohmann::json json;
};

// Two 1 GB flows share a 1 GB/s NIC (tracked on "nic 0", overlapping: [0, 2] s each, after a
// 10 us latency), then a 0.5 GB NVLink copy on "gpu 1" after the first; an untracked task.
Traced traced_model() {
  Traced t;
  auto& m = t.model;
  const auto nic = m.add_resource("nic", BytesPerSecond::from_gbps(1));
  const auto nvl = m.add_resource("nvlink", BytesPerSecond::from_gbps(1));
  const auto nic_track = m.add_track("nic 0");
  const auto gpu_track = m.add_track("gpu 1");
  m.name_category(0, "network");
  const auto a = m.add_task({.bytes = Bytes{1'000'000'000},
                             .latency = Seconds{10e-6},
                             .resources = {nic},
                             .track = nic_track,
                             .label = "send \"w\"\n"});
  m.add_task(
      {.bytes = Bytes{1'000'000'000}, .latency = Seconds{10e-6}, .resources = {nic}, .track = nic_track});
  m.add_task({.bytes = Bytes{500'000'000},
              .resources = {nvl},
              .deps = {a},
              .track = gpu_track,
              .category = 1,
              .label = "copy"});
  m.add_task({.bytes = Bytes{1}, .resources = {nvl}});
  t.result = simulate(m).value();
  std::ostringstream out;
  EXPECT_TRUE(write_chrome_trace(m, t.result, out).has_value());
  t.json = nlohmann::json::parse(out.str());  // throws, failing the test, if not valid JSON
  return t;
}

TEST(TraceWriter, HoldsOneCompleteEventPerTrackedTask) {
  const auto t = traced_model();
  std::vector<nlohmann::json> complete;
  for (const auto& e : t.json.at("traceEvents"))
    if (e.at("ph") == "X") complete.push_back(e);
  ASSERT_EQ(complete.size(), 3u);  // the untracked task is not drawn
  std::map<int, nlohmann::json> by_task;
  for (const auto& e : complete) by_task[e.at("args").at("task").get<int>()] = e;
  EXPECT_EQ(by_task.at(0).at("name"), "send \"w\"\n");
  EXPECT_EQ(by_task.at(1).at("name"), "task 1");
  EXPECT_EQ(by_task.at(0).at("cat"), "network");
  EXPECT_EQ(by_task.at(2).at("cat"), "category 1");
  EXPECT_EQ(by_task.at(2).at("args").at("bytes"), 500'000'000);
  for (const auto& [task, e] : by_task) {
    // Events span ready -> end, in microseconds.
    const auto& timing = t.result.tasks[static_cast<std::size_t>(task)];
    EXPECT_NEAR(e.at("ts").get<double>(), timing.ready.value * 1e6, 1e-3);
    EXPECT_NEAR(e.at("dur").get<double>(), (timing.end - timing.ready).value * 1e6, 1e-3);
    EXPECT_NEAR(e.at("args").at("flow_start_us").get<double>(), timing.start.value * 1e6, 1e-3);
  }
  // Both sends take 2 s (sharing the NIC) + 10 us; the copy starts when the first ends.
  EXPECT_NEAR(by_task.at(0).at("dur").get<double>(), 2e6 + 10, 1e-3);
  EXPECT_NEAR(by_task.at(2).at("ts").get<double>(), 2e6 + 10, 1e-3);
}

TEST(TraceWriter, AnOverheadIsShownWhereATaskHasOne) {
  // A 1 GB send after 10 us of latency and 5 us of overhead: its flow starts at 15 us, and its
  // args say both. The tasks above have none, and their args no overhead_us.
  Model m;
  const auto nic = m.add_resource("nic", BytesPerSecond::from_gbps(1));
  m.add_task({.bytes = Bytes{1'000'000'000},
              .latency = Seconds{10e-6},
              .overhead = Seconds{5e-6},
              .resources = {nic},
              .track = m.add_track("nic 0")});
  const auto result = simulate(m).value();
  std::ostringstream out;
  ASSERT_TRUE(write_chrome_trace(m, result, out).has_value());
  for (const auto& e : nlohmann::json::parse(out.str()).at("traceEvents"))
    if (e.at("ph") == "X") {
      EXPECT_NEAR(e.at("args").at("overhead_us").get<double>(), 5, 1e-9);
      EXPECT_NEAR(e.at("args").at("flow_start_us").get<double>(), 15, 1e-9);
    }
  for (const auto& e : traced_model().json.at("traceEvents"))
    if (e.at("ph") == "X") EXPECT_FALSE(e.at("args").contains("overhead_us"));
}

TEST(TraceWriter, OverlappingTasksOfATrackGetTheirOwnLanes) {
  const auto t = traced_model();
  std::map<int, std::string> thread_names;
  std::map<int, int> tid_of_task;
  for (const auto& e : t.json.at("traceEvents")) {
    if (e.at("ph") == "M" && e.at("name") == "thread_name")
      thread_names[e.at("tid").get<int>()] = e.at("args").at("name").get<std::string>();
    if (e.at("ph") == "X") tid_of_task[e.at("args").at("task").get<int>()] = e.at("tid").get<int>();
  }
  EXPECT_EQ(thread_names, (std::map<int, std::string>{{0, "nic 0"}, {1, "nic 0 #2"}, {2, "gpu 1"}}));
  EXPECT_EQ(tid_of_task.at(0), 0);
  EXPECT_EQ(tid_of_task.at(1), 1);
  EXPECT_EQ(tid_of_task.at(2), 2);
}

TEST(TraceWriter, RejectsAResultOfAnotherModel) {
  const auto t = traced_model();
  std::ostringstream out;
  const auto r = write_chrome_trace(Model{}, t.result, out);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code, ErrorCode::kMismatch);
  EXPECT_NE(r.error().message.find("task timings but the model 0 tasks"), std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace refit::sim
