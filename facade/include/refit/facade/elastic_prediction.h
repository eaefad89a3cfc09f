#pragma once
// Elastic refit's predictions, once (docs/guide/elastic-planning.md): a refit over some of the engines, an
// engine that joins, and an engine that dies as a refit starts. `refit simulate --members/--join/--fail`
// prints what these return and the Python package binds them; neither decides anything itself.
#include <cstdint>
#include <optional>
#include <vector>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"
#include "refit/executors/executor.h"
#include "refit/facade/prediction.h"
#include "refit/planner/membership.h"

namespace refit {

// One question at a time: members, join or fail.
struct ElasticOptions {
  std::vector<std::int32_t> members;    // --members: a refit of these engines only
  std::optional<std::int32_t> join;     // --join: the engine to fill
  std::vector<std::int32_t> peers;      // --peers: live engines a join takes from (empty: every other)
  JoinSource from = JoinSource::kBoth;  // --from: who sends a join's weights
  std::optional<std::int32_t> fail;     // --fail: the engine that dies as the refit starts
  Seconds timeout = ExecutorOptions{}.timeout;  // --timeout: the executors' bound on any wait
};

// --members: the members' refit, derived from the full plan (membership.h's member_plan).
struct MembershipDelta {
  MemberEngines membership;           // the engines and the members asked for
  Seconds full_plan_seconds;          // wall time planning the full problem
  Seconds delta_seconds;              // wall time deriving the members' plan from it
  std::int32_t resent_transfers = 0;  // transfers that send again (MemberPlan::resent)
  Bytes resent_bytes;                 // what members had through other engines, sent again
};

// --join: the joining engine filled (membership.h's join_problem, planned like any problem).
struct JoinFill {
  JoinOptions join;               // the joining engine, its peers and who sends
  std::int32_t peer_tensors = 0;  // tensors the peers send, of `tensors`
  std::int32_t tensors = 0;       // the problem's tensors
  Bytes peer_bytes;               // what the peers send from their own weights
  Bytes training_bytes;           // what the training ranks send
};

// --fail: what an engine that dies as the refit starts costs the others. Modelled plainly: the
// transport reports at once that sends to the dead engine failed, so those cost nothing; the
// others finish all that does not pass through the dead engine as the full plan would (`full`);
// if it relays for others (`relayed` > 0), they find out when their wait on it times out, then
// take what it would have relayed in a repair step (member_plan's re-sent transfers, simulated
// alone), so every other engine has its weights at max(full, timeout + repair).
struct FailureCost {
  std::int32_t engine = 0;  // the engine that dies
  Seconds timeout;          // the executors' bound on any wait
  Seconds full;             // the full refit, predicted
  Bytes relayed;            // what the dead engine forwards to other engines in the full plan
  Seconds repair;           // the repair step alone (0 when it relays nothing)
  Seconds completion;       // when every other engine has its weights
  Seconds lost;             // completion - full: at most timeout + repair
};

struct ElasticPrediction {
  std::int32_t engines = 1;  // the engines of the source's --infer
  Predictions predictions;   // of the members' refit, of the join, or (--fail) of the full refit
  std::optional<MembershipDelta> membership;  // with --members
  std::optional<JoinFill> join;               // with --join
  std::optional<FailureCost> failure;         // with --fail
};

// The engines come from the source's --infer (engines=N). Errors name the option: --members,
// --join, --peers, --fail (an engine out of range), --timeout, or a source without engines.
[[nodiscard]] Result<ElasticPrediction> predict_elastic(const PredictionInputs& in, const PredictOptions& o,
                                                        const ElasticOptions& e);

// `refit simulate --json` with --members, --join or --fail: predictions_json and an "elastic" object.
nlohmann::ordered_json elastic_json(const ElasticPrediction& p);

}  // namespace refit
