#pragma once
// What refit reports about a plan and a prediction, as JSON: the one writer of these fields for
// `refit plan --json`, `refit simulate --json` and the Python package's dictionaries, so that a
// field added here reaches all three.
#include <vector>

#include <nlohmann/json.hpp>

#include "refit/executors/executor.h"
#include "refit/lowering/explain.h"
#include "refit/planner/plan.h"
#include "refit/planner/plan_stats.h"
#include "refit/simulator/plan_simulation.h"

namespace refit {

// What one rank's lowered program does (`refit plan --explain RANK`).
nlohmann::ordered_json explain_json(const lowering::ProgramSummary& s);

// Every field of `refit plan --json` but the planning time (the caller's): the plan's strategy,
// sizes, bytes by path, per NIC (by NIC id, each way), per GPU's NVLink (by GPU id, each way) and
// into each destination domain over the network (by domain id), the lower bound and the plan
// hash, and "explain" when the lowering explained a rank.
nlohmann::ordered_json plan_report_json(const Plan& plan, const PlanStats& stats, const LowerBound& bound,
                                        const lowering::PlanLowering& lowering);

// The critical path of a prediction by kind of work, in seconds.
nlohmann::ordered_json breakdown_json(const PlanSimulation& s);

// The resources a prediction loaded, busiest (highest utilisation) first, ties in the simulator's
// order: what `refit simulate` prints the head of and writes whole under "resources".
std::vector<ResourceReport> busiest_first(const PlanSimulation& s);

// An execution's work under the same names (`refit run --json`): "breakdown_s" holds every
// TimeKind, the seconds the executor timed or null; "breakdown_not_timed" says for each null why.
// The rank's time beyond these kinds it waited (for grants, data and its peers).
struct MeasuredBreakdown {
  nlohmann::ordered_json seconds;    // every TimeKind's name: the seconds timed, or null
  nlohmann::ordered_json not_timed;  // for each null kind, why the executor did not time it
  Seconds busy;                      // the timed kinds together
};
// `work` (one rank's execute()) under the simulator's breakdown names.
MeasuredBreakdown measured_breakdown(const WorkTimes& work);

// The time `refit run` reports of repeated executions, and calibration measures alike: the median,
// of an even count the upper middle one (a time that was measured); 0 s of none.
Seconds median_time(std::vector<Seconds> times);

}  // namespace refit
