#pragma once
// Predicts how long a Plan takes on a Cluster: every transfer becomes flows on the resources it
// crosses (NIC tx/rx, NVLink egress/ingress, copy engines, fabric uplinks when oversubscribed),
// relays forward chunk by chunk, and the engine (simulate.h) shares bandwidth max-min fairly.
#include <array>
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/planner/execution_model.h"
#include "refit/planner/plan.h"
#include "refit/simulator/calls.h"
#include "refit/topology/rank_map.h"

namespace refit {

struct PlanSimulationOptions {
  std::function<void(double fraction_done)> progress;  // called at most twice a second
  std::ostream* trace = nullptr;                       // Chrome trace event JSON, when set
  // Chunks a receiver grants each sender ahead, instead of the execution model's pair window; a
  // (sender, receiver) pair sends its transfers in plan order (0: every transfer at once, as
  // soon as its data is there).
  std::optional<std::int32_t> window;
  // How a deployment cuts the plan into calls (deployment.h); nullptr runs every transfer in
  // one go, with no per-call costs.
  const CallSchedule* calls = nullptr;
  // The executors' staging per rank (ExecutorOptions::staging, refit run --staging), which sets
  // the chunks they cut messages into: the simulator lowers the plan as they do.
  Bytes staging = lowering::kDefaultStaging;
  // SimulateOptions::rate_tolerance; 0 simulates exactly. Plans are all-to-alls where every
  // message end shifts dozens of rates a little, so a tolerance saves most of the work while the
  // predicted time stays within the noise of the exact one (bench/RESULTS.md).
  double rate_tolerance = kDefaultRateTolerance;
  static constexpr double kDefaultRateTolerance = 1e-2;
  // SimulateOptions::instant. Tens of thousands of pairs end microseconds apart, most of them
  // in the last few percent of a plan's time, where each end reshapes most fair shares. Letting
  // each event wait a thousandth of its own task's time handles most of them together; how
  // much faster it simulates and how little it moves predictions is measured in bench/RESULTS.md.
  double instant = kDefaultInstant;
  static constexpr double kDefaultInstant = 1e-3;
};

struct ResourceReport {
  std::string name;  // e.g. "nic 3 tx", "gpu 5 nvlink in", "gpu 5 copy"
  Bytes bytes;
  double utilisation = 0;  // bytes / (capacity * predicted time)
};

struct CriticalTransfer {
  std::int32_t transfer = -1;  // index into Plan::transfers; -1 for a call's own task
  std::int32_t call = -1;      // index into CallSchedule::calls; -1 without a schedule
  std::string what;            // what its flow spent: a TimeKind's name (time_kind_name)
  Seconds start;
  Seconds end;
};

// A share of the critical path: one kind of time spent in one kind of call.
struct Contributor {
  std::string what;    // e.g. "network time of packed broadcast calls"
  Seconds time;        // on the critical path
  std::int64_t steps;  // critical-path steps it adds up
};

// What the critical path's time is spent on: per-message latency, flow time over NICs, over NVLink
// and between two ranks of one GPU, device copies (pack, unpack, stack, concatenate), FP8
// quantization (at senders, landing ranks or receivers), and calls' fixed costs (host work,
// launches, barriers). A prediction's breakdown is indexed by it; time_kind_name is the one
// spelling every output (JSON, tables, Python) uses.
enum class TimeKind : std::uint8_t { kLatency, kNetwork, kNvlink, kCopy, kPackUnpack, kQuantize, kFixed };
inline constexpr std::size_t kTimeKinds = 7;
// "latency", "network", "nvlink", "copy", "pack_unpack", "quantize", "fixed"
std::string_view time_kind_name(TimeKind kind);

// Seconds by TimeKind.
class TimeBreakdown {
 public:
  Seconds& operator[](TimeKind k) { return by_kind_[static_cast<std::size_t>(k)]; }
  Seconds operator[](TimeKind k) const { return by_kind_[static_cast<std::size_t>(k)]; }
  Seconds total() const;

 private:
  std::array<Seconds, kTimeKinds> by_kind_{};
};

struct PlanSimulation {
  Seconds predicted;
  // Along the critical path, by what it was spent on; its parts add up to `predicted`.
  TimeBreakdown breakdown;
  // Of the flow time on the critical path, what calls spent after their average rank had
  // received all its bytes, waiting for the slowest one.
  Seconds waiting;
  std::vector<Contributor> contributors;        // the critical path by what and call kind, largest first
  std::vector<ResourceReport> resources;        // every resource that carried bytes
  std::vector<CriticalTransfer> critical_path;  // one entry per task on the path
  std::int64_t tasks = 0;
  std::uint64_t events = 0;
  // Constants the prediction rests on for want of a measured figure, a sentence each.
  std::vector<std::string> assumptions;
};

// The execution model (pair window, zero-copy rule) simulate_plan runs `plan` as under `options`:
// the deployment's (CallSchedule::execution) where its calls name one, else the plan's own.
const ExecutionModel& execution_of(const Plan& plan, const PlanSimulationOptions& options);

// `problem` supplies the ranks' local boxes: a message whose bytes are not one contiguous run of
// the sender's (receiver's) buffer is packed (unpacked) through that GPU's copy engine.
Result<PlanSimulation> simulate_plan(const Plan& plan, const ReshardProblem& problem,
                                     const PlacedCluster& cluster, const PlanSimulationOptions& options = {});

}  // namespace refit
