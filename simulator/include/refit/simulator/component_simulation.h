#pragma once
// Simulating a plan by its independent components: groups of transfers that share no rank and
// no resource of the flow model (NIC sides, a GPU's NVLink ports and copy engine, a domain's
// uplinks when the fabric is oversubscribed). Max-min sharing couples flows only through shared
// resources, so each component runs as it would alone and the plan takes as long as the slowest.
// Components that are the same up to renumbering their ranks, GPUs, NICs and domains (equal
// canonical signatures, compared in full) are simulated once: a plan whose source replicas each
// serve their own engines repeats one component per replica.
//
// Exactness. With PlanSimulationOptions::rate_tolerance and ::instant at 0 the prediction is the
// whole plan's to rounding (tests/simulator/component_simulation_test.cc). With their defaults
// the simulator batches rate updates and near-simultaneous ends among the events it sees, and a
// component simulated alone sees only its own, so the predicted time can differ from the whole
// plan's simulation by about what those tolerances move it (bench/RESULTS.md measures it).
// A deployment's call schedule couples ranks through its calls and is refused, as is a trace, but
// for one call of the whole plan that costs nothing of its own (how refit's executors run a plan):
// it ends with the last transfer, and each component runs under that call over its own transfers.
#include <cstdint>

#include "refit/simulator/plan_simulation.h"

namespace refit {

struct ComponentSimulation {
  // The plan's simulation, as simulating it whole reports it: the slowest component's predicted
  // time, breakdown, waiting, contributors and critical path (its transfer ids index the whole
  // plan); every component's resources, each copy of a simulated one with its own (renamed to
  // its GPUs, NICs and domains, utilised over the plan's time), in the whole simulation's order;
  // tasks and events over every component (what simulating the whole plan builds and handles).
  PlanSimulation plan;
  std::int64_t components = 0;  // independent components in the plan
  std::int64_t simulated = 0;   // distinct ones among them, each simulated once
};

// What simulate_plan_by_components does with a plan whose components are not all alike.
enum class DistinctComponents {
  kSimulateEach,  // simulates each distinct one once; the slowest is the plan's
  // refuses it (kUnsupported) before simulating anything: for a caller that then simulates the
  // plan whole, as the default tolerances tell distinct components' predictions apart from it
  kRefuse,
};

Result<ComponentSimulation> simulate_plan_by_components(
    const Plan& plan, const ReshardProblem& problem, const PlacedCluster& cluster,
    const PlanSimulationOptions& options = {},
    DistinctComponents distinct_components = DistinctComponents::kSimulateEach);

}  // namespace refit
