#pragma once
// The event loop of simulate(): dependencies, latencies, overheads and flow completions in time
// order.
#include <chrono>
#include <cstdint>
#include <vector>

#include "event_queue.h"
#include "flow_network.h"
#include "refit/core/error.h"
#include "refit/core/index.h"
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
  [[nodiscard]] Result<EngineRun> run();

 private:
  // Events this close together, relative to their time, are one instant whatever the options.
  static constexpr double kCoincident = 1e-12;

  double slack(const Event& event) const;
  void run_instant();
  void handle(const Event& event, double now);
  void start(std::int32_t task, double now);
  void flow(std::int32_t task, double now);
  void end_flow(std::int32_t task, double now);
  void schedule_completion(std::int32_t flow);
  void become_ready(std::int32_t task, double now);
  void end_task(std::int32_t task, double now);
  void report_progress();

  const Model& model_;
  const Dependents& dependents_;
  const SimulateOptions& options_;
  FlowNetwork network_;
  EventQueue queue_;
  std::vector<std::int32_t> pending_deps_;
  std::vector<char> done_;
  std::vector<char> waiting_;  // latency paid, waiting for the stream's previous task to end
  std::vector<Event> batch_;   // scratch of run_instant()
  std::int32_t ended_ = 0;
  EngineRun out_;
  std::chrono::steady_clock::time_point last_progress_;
};

}  // namespace refit::sim
