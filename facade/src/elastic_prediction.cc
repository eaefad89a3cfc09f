#include "refit/facade/elastic_prediction.h"

#include <chrono>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/elapsed.h"
#include "refit/core/try.h"
#include "refit/facade/join_run.h"
#include "refit/refit.h"

namespace refit {
namespace {

[[nodiscard]] Result<void> check_one_question(const ElasticOptions& e) {
  const int asked = (e.members.empty() ? 0 : 1) + (e.join ? 1 : 0) + (e.fail ? 1 : 0);
  if (asked != 1) return invalid("give exactly one of --members, --join and --fail");
  if (!e.peers.empty() && !e.join)
    return invalid("--peers names the engines a --join takes from: add --join");
  if (!(e.timeout.value > 0 && e.timeout <= kMaxTimeout))
    return out_of_range(fmt::format("--timeout: {} s is not in (0, {}] s, the executors' range",
                                    e.timeout.value, kMaxTimeout.value));
  return {};
}

// Elastic refits are refit's executors' own: predicted as those run them unless told otherwise, and
// refused as a deployment that does not perform them would run them. Those executors run a delta
// refit over the whole membership only (a joining or restarted engine has no earlier weights to
// patch), so a delta prediction of an elastic step would be of a refit nothing performs.
[[nodiscard]] Result<PredictOptions> elastic_deployment(PredictOptions o) {
  if (o.delta)
    return unsupported(
        "--delta: refit's executors run a delta refit over every engine only, and a joining or restarted "
        "engine has no earlier weights to patch: drop --delta, or --members, --join and --fail");
  if (o.deployment.empty()) {
    o.deployment = std::string(refit_executors().name);
    return o;
  }
  const DeploymentInfo* d = REFIT_TRY_IN(find_deployment(o.deployment), "--deployment");
  if (!d->no_elastic.empty()) return unsupported(fmt::format("--deployment {}: {}", d->name, d->no_elastic));
  return o;
}

// `derived` (a plan of `problem`), simulated as options.deployment runs it.
[[nodiscard]] Result<Predictions> simulate_given(const PredictionInputs& in, const ReshardProblem& problem,
                                                 const PlacedCluster& cluster, const PredictOptions& o,
                                                 const Plan& derived) {
  return predict(PredictionInputs{.source = in.source, .problem = problem, .cluster = cluster}, o, derived);
}

Bytes bytes_of(std::span<const Transfer> transfers) {
  Bytes sum;
  for (const auto& t : transfers) sum += t.bytes;
  return sum;
}

[[nodiscard]] Result<void> predict_members(const PredictionInputs& in, const PredictOptions& o,
                                           const ElasticOptions& e, ElasticPrediction& out) {
  const MemberEngines m{.engines = out.engines, .members = e.members};
  const auto members = REFIT_TRY_IN(members_problem(in.problem, m), "--members");
  auto start = std::chrono::steady_clock::now();
  auto full = REFIT_TRY(plan(in.problem, in.cluster, o.strategy, o.plan));
  const auto full_seconds = seconds_since(start);
  start = std::chrono::steady_clock::now();
  const auto derived = REFIT_TRY_IN(member_plan(std::move(full), in.problem, in.cluster, m), "--members");
  const auto delta_seconds = seconds_since(start);
  out.predictions = REFIT_TRY(simulate_given(in, members, in.cluster, o, derived.plan));
  out.predictions.rows.front().plan_seconds = delta_seconds;
  out.membership = MembershipDelta{
      .membership = m,
      .full_plan_seconds = full_seconds,
      .delta_seconds = delta_seconds,
      .resent_transfers = derived.resent,
      .resent_bytes =
          bytes_of(std::span(derived.plan.transfers).first(static_cast<std::size_t>(derived.resent)))};
  return {};
}

// Bytes the join's senders send from what they hold, split by whether the sender is a peer.
std::pair<Bytes, Bytes> sent_from_held(const Plan& p, const JoinProblem& join) {
  Bytes peers, training;
  for (const auto& t : p.transfers)
    for (const auto& s : t.segments)
      if (s.via == kFromSourceShard)
        (t.sender.value < join.training_ranks ? training : peers) += p.segment_bytes(s);
  return {peers, training};
}

[[nodiscard]] Result<void> predict_join(const PredictionInputs& in, const PredictOptions& o,
                                        const ElasticOptions& e, ElasticPrediction& out) {
  const auto run = REFIT_TRY(plan_join(in.problem, in.cluster, out.engines,
                                       JoinRequest{.joining = *e.join, .peers = e.peers, .from = e.from},
                                       o.strategy, o.plan));
  out.predictions = REFIT_TRY(simulate_given(in, run.join.problem, run.join.cluster, o, run.plan));
  out.predictions.rows.front().plan_seconds = run.plan_seconds;
  const auto [peers, training] = sent_from_held(run.plan, run.join);
  out.join = JoinFill{.join = run.options,
                      .peer_tensors = run.join.peer_tensors,
                      .tensors = static_cast<std::int32_t>(in.problem.tensors().size()),
                      .peer_bytes = peers,
                      .training_bytes = training};
  return {};
}

// What the dead engine's ranks forward to ranks outside it in `full`.
Bytes relayed_by(const Plan& full, const std::vector<Rank>& dead) {
  const auto in_dead = [&](Rank r) { return r.value >= dead.front().value && r.value <= dead.back().value; };
  Bytes sum;
  for (const auto& t : full.transfers)
    if (in_dead(t.sender) && !in_dead(t.receiver)) sum += t.bytes;
  return sum;
}

[[nodiscard]] Result<void> predict_failure(const PredictionInputs& in, const PredictOptions& o,
                                           const ElasticOptions& e, ElasticPrediction& out) {
  const auto dead = *e.fail;
  if (dead < 0 || dead >= out.engines)
    return out_of_range(fmt::format("--fail: engine {} is not in [0, {})", dead, out.engines));
  MemberEngines others{.engines = out.engines, .members = {}};
  for (std::int32_t k = 0; k < out.engines; ++k)
    if (k != dead) others.members.push_back(k);
  if (others.members.empty())
    return invalid("--fail: the only engine cannot fail with others left to complete");
  auto full = REFIT_TRY(plan(in.problem, in.cluster, o.strategy, o.plan));
  out.predictions = REFIT_TRY(simulate_given(in, in.problem, in.cluster, o, full));
  FailureCost f{.engine = dead,
                .timeout = e.timeout,
                .full = out.predictions.rows.front().sim.predicted,
                .relayed = relayed_by(full, engine_ranks(in.problem, out.engines, dead)),
                .repair = Seconds{0},
                .completion = Seconds{0},
                .lost = Seconds{0}};
  f.completion = f.full;
  if (f.relayed.value > 0) {
    const auto members = REFIT_TRY(members_problem(in.problem, others));
    auto derived = REFIT_TRY(member_plan(std::move(full), in.problem, in.cluster, others));
    derived.plan.transfers.resize(static_cast<std::size_t>(derived.resent));
    const auto repair = REFIT_TRY(simulate_given(in, members, in.cluster, o, derived.plan));
    f.repair = repair.rows.front().sim.predicted;
    f.completion = std::max(f.full, f.timeout + f.repair);
  }
  f.lost = f.completion - f.full;
  out.failure = f;
  return {};
}

}  // namespace

Result<ElasticPrediction> predict_elastic(const PredictionInputs& in, const PredictOptions& asked,
                                          const ElasticOptions& e) {
  REFIT_TRY(check_one_question(e));
  const auto o = REFIT_TRY(elastic_deployment(asked));
  ElasticPrediction out{.engines = REFIT_TRY(inference_engines(in.source)),
                        .predictions = {},
                        .membership = std::nullopt,
                        .join = std::nullopt,
                        .failure = std::nullopt};
  if (!e.members.empty()) REFIT_TRY(predict_members(in, o, e, out));
  if (e.join) REFIT_TRY(predict_join(in, o, e, out));
  if (e.fail) REFIT_TRY(predict_failure(in, o, e, out));
  return out;
}

nlohmann::ordered_json elastic_json(const ElasticPrediction& p) {
  auto j = predictions_json(p.predictions);
  nlohmann::ordered_json x{{"engines", p.engines}};
  if (const auto& m = p.membership) {
    x["members"] = m->membership.members;
    x["full_plan_s"] = m->full_plan_seconds.value;
    x["delta_plan_s"] = m->delta_seconds.value;
    x["resent_transfers"] = m->resent_transfers;
    x["resent_bytes"] = m->resent_bytes.value;
  }
  if (const auto& f = p.join) {
    x["join"] = f->join.joining;
    x["peers"] = f->join.peers;
    x["from"] = join_source_name(f->join.source);
    x["peer_tensors"] = f->peer_tensors;
    x["tensors"] = f->tensors;
    x["peer_bytes"] = f->peer_bytes.value;
    x["training_bytes"] = f->training_bytes.value;
    x["fill_s"] = p.predictions.rows.front().sim.predicted.value;
  }
  if (const auto& f = p.failure) {
    x["fail"] = f->engine;
    x["timeout_s"] = f->timeout.value;
    x["full_s"] = f->full.value;
    x["relayed_bytes"] = f->relayed.value;
    x["repair_s"] = f->repair.value;
    x["completion_s"] = f->completion.value;
    x["lost_s"] = f->lost.value;
  }
  j["elastic"] = std::move(x);
  return j;
}

}  // namespace refit
