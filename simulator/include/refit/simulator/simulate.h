#pragma once
// Runs a Model as a discrete-event simulation at flow level.
//
// A task becomes ready when all its dependencies have ended, waits its latency, then moves its
// bytes as one flow across its resources; a task of a stream (model.h) also waits for the
// stream's previous task, and may take over its flow. Active flows share resources max-min fairly
// (max_min.h); rates are recomputed whenever flows start or end, incrementally: only the
// resources whose fair share the change moves are looked at (see src/incremental_max_min.h).
// A task with no bytes ends right after its latency.
// Events are processed in (time, insertion) order; events within a relative 1e-12 of each other
// are handled as one instant, so that flows that finish together cause one recomputation. Rates
// that move by less than a relative 1e-9 are left as they were: timings are exact to about that
// (unless SimulateOptions::rate_tolerance asks for less).
// Deterministic: the same model gives bit-identical results.
#include <cstdint>
#include <functional>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/simulator/model.h"

namespace refit::sim {

struct SimulateOptions {
  // Called with the fraction of tasks that have ended, at most once per progress_interval of
  // wall-clock time (never for a simulation that is faster than that).
  std::function<void(double fraction_done)> progress;
  Seconds progress_interval{0.5};
  // Trades exactness for speed on large contended networks, in [0, 1); 0 is exact. A flow keeps
  // its rate until its max-min fair share rises by more than this fraction (falls always apply),
  // so a change stops spreading where it moves rates by less. No resource is ever
  // oversubscribed; tests show every flow within (1 + t)^2 of the fastest flow on a resource full
  // to within (1 + t)^2, and the makespan close to the exact one
  // (tests/simulator/simulate_tolerance_test.cc; measured speed-ups in bench/RESULTS.md).
  double rate_tolerance = 0;
  // Trades exactness for speed where many events fall close together, in [0, 1); 0 is exact (to
  // rounding). An event may be handled late by up to this fraction of what its task spent reaching
  // it (its latency, its overhead, or its flow so far): events that allow it are handled together
  // at the last one's time and the rates are recomputed once. A chain of tasks that shares no
  // resource with others is late by at most this fraction of its own length, wherever it falls in
  // the run (tests/simulator/simulate_test.cc); where flows share one, an end handled late also
  // keeps the others' shares as they were for as long, which can make them later (or, freeing a
  // resource later for a third, another earlier) than exact.
  double instant = 0;
};

struct TaskTiming {
  Seconds ready;  // all dependencies ended
  Seconds start;  // latency and overhead paid, data starts to flow
  Seconds end;
};

struct ResourceUsage {
  Bytes bytes;         // carried by all the flows that cross it
  Seconds busy;        // time during which at least one flow crossed it
  double utilisation;  // bytes / (capacity * makespan): the average fraction of capacity used
};

// How a step of the critical path depends on the step before it.
enum class CriticalLink : std::uint8_t {
  kFirst,       // the path starts with this task, ready at time 0
  kDependency,  // became ready (or, in a stream, free to start) when the previous step ended
  kContention,  // flowed slower than alone on its resources; the previous step shared one of
                // them and ended while this one was flowing
};

struct CriticalStep {
  TaskId task;
  CriticalLink link;
  Seconds from;  // the path's time is this task's from `from` to its end
};

// The makespan split along the critical path: latency paid on it, and flow time per category
// (by_category[c] for category c). latency + sum(by_category) == makespan.
struct Breakdown {
  Seconds latency;
  std::vector<Seconds> by_category;
};

struct SimulationResult {
  Seconds makespan;                         // end of the last task; 0 for an empty model
  std::vector<TaskTiming> tasks;            // indexed by TaskId
  std::vector<ResourceUsage> resources;     // indexed by ResourceId
  std::vector<CriticalStep> critical_path;  // from time 0 to the last task to end
  Breakdown breakdown;
  std::uint64_t events = 0;  // events processed (stale rate predictions not counted)
};

// Errors, each naming the task or resource: kOutOfRange for a capacity that is not positive and
// finite, a negative byte count, a negative or non-finite latency or overhead, a rate_tolerance or instant
// outside [0, 1); kNotFound for an unknown resource, track, dependency or stream;
// kInvalidArgument for a task with bytes but no resource, a stream added after a task that names
// it, a dependency cycle (stream order included). kInternal when a flow never ends (its rate
// rounded to zero).
[[nodiscard]] Result<SimulationResult> simulate(const Model& model, const SimulateOptions& options = {});

}  // namespace refit::sim
