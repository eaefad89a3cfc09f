#pragma once
// The prediction use case, once: how long a refit takes on a cluster, for one strategy (or a plan
// made before) as a deployment runs it, or for every strategy side by side. `refit simulate`
// prints what these return and the Python package binds them; neither decides anything itself.
#include <functional>
#include <optional>
#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/facade/problem_source.h"
#include "refit/planner/plan.h"
#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/deployment.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/simulator/sensitivity.h"
#include "refit/topology/rank_map.h"

namespace refit {

// One round of a delta refit's step (executors' delta_schedule.h): one pass of the codec, round
// k + 1 being the relays that forward what they decoded in round k, encoded again; relays that
// forward payloads as they arrived do so in the hops of the round.
struct DeltaRound {
  Bytes moved_bytes;  // the round's payloads' expected bytes
  Seconds encode;     // the busiest sender's encoding of the boxes it encodes in the round (each once)
  Seconds transfer;   // the round's payloads' transfers, simulated hop by hop, added up
  Seconds decode;     // the busiest receiver's audit and decoding of its pieces of the round
  std::int32_t hops = 1;
};

// One step of a delta refit (executors' delta_executor.h) beside a dense prediction
// (PredictOptions::delta): each piece's payload after one step of the synthetic update at the
// change fraction (delta/payload_estimate.h: measured by encoding a sample; a relay's payload of a
// box taken equal to its sender's, as when their baselines agree), moved round by round and hop by
// hop as the delta step's plan of the hop (executors' delta_step.h) and simulated as the same
// deployment runs it, plus the CPU codec's time on one core per rank from its measured speeds
// (delta/codec_speed.h). The executor runs each round's encoding, hops and decoding one after
// another, and the rounds one after another, so all their times add up.
struct DeltaPrediction {
  double change_fraction = 0;
  Bytes dense_bytes;               // what the plan moves, what a full refit moves
  Bytes moved_bytes;               // the payloads' expected bytes, over every round
  Seconds transfer;                // the rounds' transfers
  Seconds encode;                  // the rounds' encodings
  Seconds decode;                  // the rounds' audits and decodings
  Seconds predicted;               // encode + transfer + decode
  std::vector<DeltaRound> rounds;  // one per pass of the codec (delta_schedule.h)
};

// One prediction: a plan, who ran it, and what the simulator found.
struct Prediction {
  std::string strategy;                        // the plan's
  const DeploymentInfo* deployment = nullptr;  // who ran it
  std::int32_t window = 0;                     // chunks in flight per (sender, receiver) pair
  PlanStats stats;                             // the plan's bytes and transfers
  // What the deployment moves: every tensor of the problem, or for a benchmark that times a
  // representative per layer pattern (m2n-bench) a part of it, with the bound of that part, which
  // is what its prediction is judged by (it may well lie below the problem's).
  bool moves_part = false;
  Bytes moved_bytes;
  LowerBound moved_bound;
  PlanSimulation sim;                                 // predicted time, breakdown, critical path
  Seconds plan_seconds;                               // wall time spent planning (or loading the plan)
  Seconds simulate_seconds;                           // wall time spent simulating
  std::vector<Sensitivity> sensitivity;               // with PredictOptions::sensitivity
  std::vector<std::string> notes;                     // what the deployment assumed, or ran instead
  std::optional<double> speedup_vs_gather_broadcast;  // in a comparison with that baseline
  std::optional<double> time_vs_refit;                // in a comparison with refit's own row
  std::optional<DeltaPrediction> delta;               // with PredictOptions::delta, where it applies
};

// What `refit simulate` prints of a problem: its lower bound and one prediction per row.
struct Predictions {
  std::string cluster;  // the cluster's name
  LowerBound bound;     // of the problem as asked (every row is judged against it)
  std::vector<Prediction> rows;
};

// The problem, as its source says (so that a baseline deployed today can be run on the problem
// quantized at the receivers, as it is deployed), and the cluster it runs on.
struct PredictionInputs {
  const ProblemSource& source;  // a source without a model or manifest: no such second problem
  const ReshardProblem& problem;
  const PlacedCluster& cluster;
};

struct PredictOptions {
  std::string strategy{strategy_info(kDefaultStrategy).name};  // planned with this, when no plan is given
  PlanOptions plan;                                            // its chunk
  std::string deployment;                     // who runs it; empty: the strategy's default deployment
  std::optional<std::int32_t> window;         // unset: the plan's execution model's pair window
  Bytes staging = lowering::kDefaultStaging;  // the executors' staging per rank (refit run --staging)
  bool sensitivity = false;                   // simulate again with each constant -20% and +20%
  // Also predict a delta refit's step at this change fraction, for each row refit's executors run
  // whose plan the delta executor takes (bf16 and fp32 weights, relays that forward from their own
  // destination shards); a note says why not where it does not apply.
  std::optional<double> delta;
  std::ostream* trace = nullptr;  // Chrome trace event JSON of the predicted plan
  // Simulate a row's plan by its independent components, each distinct one once
  // (component_simulation.h), where that gives the whole simulation's prediction: a row that draws
  // no trace, run with no calls or as one call of the whole plan (refit's executors), whose
  // components are all alike (a row with distinct ones is simulated whole). Its every figure,
  // resources included, is then the whole simulation's (to rounding). Every front end leaves it
  // on, so that they all predict alike; off, every row is simulated whole, what tests check it by.
  bool by_components = true;
  // On long simulations; with jobs other than 1, from several threads at once.
  std::function<void(std::string_view row, double fraction_done)> progress;
  // compare(): strategies planned and simulated at once, each on a thread of its own (0: one
  // per core). Each holds its plan and model meanwhile, so more jobs take more memory.
  std::int32_t jobs = 1;
};

// One strategy planned here (options.strategy), or `plan` (a plan file: simulated as it is; one of
// a baseline that moves fp8 before the engines, which no deployed baseline does, runs as refit's
// executors run it), as options.deployment runs it. A deployed baseline runs the problem quantized
// at the receivers, as deployed today (a note says so). Errors name the option (--deployment,
// --window, --strategy).
[[nodiscard]] Result<Predictions> predict(const PredictionInputs& in, const PredictOptions& options,
                                          const std::optional<Plan>& plan = std::nullopt);

// Every strategy as its default deployment runs it, and direct and m2n-ring also as refit's
// executors would run their plans; each with its speed-up over gather-broadcast as NeMo RL runs it
// and its time relative to refit's own row. options.strategy names the row options.trace draws.
[[nodiscard]] Result<Predictions> compare(const PredictionInputs& in, const PredictOptions& options);

// `refit simulate --json`: the cluster, the bound and a row per prediction (the one writer of
// these fields, for the command and the Python package).
nlohmann::ordered_json predictions_json(const Predictions& p);

}  // namespace refit
