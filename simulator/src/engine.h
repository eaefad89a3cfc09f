#pragma once
// The event loop of simulate(): dependencies, latencies and flow completions in time order.
#include <chrono>
#include <cstdint>
#include <vector>

#include "flow_network.h"
#include "refit/core/error.h"
#include "refit/simulator/simulate.h"
#include "validate.h"

namespace refit::sim {

struct EngineRun {
  std::vector<TaskTiming> timings;
  std::vector<double> busy;                    // per resource, seconds
  std::vector<std::int32_t> flow_completions;  // tasks with bytes, in the order they ended
  std::uint64_t events = 0;
};

class Engine {
 public:
  // The model must have passed check_model and check_acyclic.
  Engine(const Model& model, const Dependents& dependents, const SimulateOptions& options);
  Result<EngineRun> run();

 private:
  enum class EventKind : std::uint8_t { kLatencyPaid, kFlowDone };
  struct Event {
    double time;
    std::uint64_t seq;  // insertion order: equal times are handled first come, first served
    std::int32_t task;
    std::uint32_t version;  // a kFlowDone is stale once the flow's version moved on
    EventKind kind;
  };
  static bool later(const Event& a, const Event& b) {
    return a.time > b.time || (a.time == b.time && a.seq > b.seq);
  }
  static std::size_t index(std::int32_t i) { return static_cast<std::size_t>(i); }

  void push(double time, std::int32_t task, EventKind kind, std::uint32_t version);
  Event pop();
  bool is_stale(const Event& e) const;
  void run_instant(double now);
  void handle(const Event& event, double now);
  void become_ready(std::int32_t task, double now);
  void end_task(std::int32_t task, double now);
  void drop_stale_events();
  void report_progress();

  const Model& model_;
  const Dependents& dependents_;
  const SimulateOptions& options_;
  FlowNetwork network_;
  std::vector<Event> queue_;  // min-heap by (time, seq)
  std::uint64_t next_seq_ = 0;
  std::size_t latency_events_ = 0;  // queued kLatencyPaid events: never stale
  std::vector<std::int32_t> pending_deps_;
  std::vector<char> done_;
  std::int32_t ended_ = 0;
  EngineRun out_;
  std::chrono::steady_clock::time_point last_progress_;
};

}  // namespace refit::sim
