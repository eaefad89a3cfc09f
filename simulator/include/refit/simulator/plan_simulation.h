#pragma once
// Predicts how long a Plan takes on a Cluster: every transfer becomes flows on the resources it
// crosses (NIC tx/rx, NVLink egress/ingress, copy engines, fabric uplinks when oversubscribed),
// relays forward chunk by chunk, and the engine (simulate.h) shares bandwidth max-min fairly.
#include <functional>
#include <ostream>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/topology/cluster.h"

namespace refit {

struct PlanSimulationOptions {
  std::function<void(double fraction_done)> progress;  // called at most twice a second
  std::ostream* trace = nullptr;                        // Chrome trace event JSON, when set
  // Messages a rank keeps in flight, posted in plan order (0: all at once).
  std::int32_t window = kDefaultWindow;
  static constexpr std::int32_t kDefaultWindow = 8;
  // SimulateOptions::rate_tolerance; 0 simulates exactly. Plans are all-to-alls where every
  // message end shifts dozens of rates a little: at 1e-2 a DeepSeek-V3 plan on 256 NICs
  // simulates 2x faster with 16 messages in flight, and its predicted time stays within the
  // noise of the exact one (which moves by 0.2-1% when NIC speeds are perturbed by 1e-6).
  double rate_tolerance = kDefaultRateTolerance;
  static constexpr double kDefaultRateTolerance = 1e-2;
};

struct ResourceReport {
  std::string name;   // e.g. "nic 3 tx", "gpu 5 nvlink in", "gpu 5 copy"
  Bytes bytes;
  double utilisation = 0;  // bytes / (capacity * predicted time)
};

struct CriticalTransfer {
  std::int32_t transfer = -1;  // index into Plan::transfers
  std::string what;            // "network", "nvlink" or "copy"
  Seconds start;
  Seconds end;
};

struct PlanSimulation {
  Seconds predicted;
  // Along the critical path; latency + network + nvlink + copy + pack == predicted.
  Seconds latency, network, nvlink, copy, pack;
  std::vector<ResourceReport> resources;        // every resource that carried bytes
  std::vector<CriticalTransfer> critical_path;  // one entry per task on the path
  std::int64_t tasks = 0;
  std::uint64_t events = 0;
};

// `problem` supplies the ranks' local boxes: a message whose bytes are not one contiguous run of
// the sender's (receiver's) buffer is packed (unpacked) through that GPU's copy engine.
Result<PlanSimulation> simulate_plan(const Plan& plan, const ReshardProblem& problem,
                                     const Cluster& cluster,
                                     const PlanSimulationOptions& options = {});

}  // namespace refit
