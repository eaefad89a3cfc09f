#include "refit/facade/prediction.h"
#include "refit/core/elapsed.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>

#include <fmt/format.h>

#include "delta_prediction.h"
#include "refit/core/try.h"
#include "refit/refit.h"
#include "refit/simulator/component_simulation.h"
#include "refit/topology/cache_regime.h"

#include "in_parallel.h"

namespace refit {
namespace {

const char* const kReceiverNote = "quantized at the receiver, bf16 on the network, as deployed today";
const char* const kFp8PlanNote =
    "the plan file moves fp8 quantized before the engines, which no deployed baseline does: predicted as "
    "refit's executors run it";

// Whether some weight of the plan is quantized before it reaches the inference engines.
bool quantizes_before_engines(const Plan& plan) {
  return std::ranges::any_of(plan.tensors, [](const TensorSpec& t) {
    return t.quantization &&
           (t.quantization->site == QuantSite::kSender || t.quantization->site == QuantSite::kLanding);
  });
}

// Whether the plan moves fp8: some weight quantized before the engines, or trained in fp8.
bool moves_fp8(const Plan& plan) {
  return std::ranges::any_of(plan.tensors, [](const TensorSpec& t) {
    return t.quantization && t.quantization->site != QuantSite::kReceiver;
  });
}

// The deployed baselines move bf16 and quantize on the inference side (NeMo RL quantizes on the
// receiver): the problem quantized at the receivers, when the one asked for quantizes before the
// engines; nothing otherwise, or when the source cannot say (a problem given as layouts).
[[nodiscard]] Result<std::optional<ReshardProblem>> at_receivers(const ProblemSource& source) {
  const auto& model = source.model_options;
  const bool before_engines = model.quantize_at == quant_site_name(QuantSite::kSender) ||
                              model.quantize_at == quant_site_name(QuantSite::kLanding);
  if (model.quantize.empty() || !before_engines || (source.model.empty() && source.manifest.empty()))
    return std::nullopt;
  auto receivers = source;
  receivers.model_options.quantize_at = quant_site_name(QuantSite::kReceiver);
  return REFIT_TRY(load_problem(receivers));
}

// Who runs `plan`: options.deployment, or its strategy's default (refit's executors for a plan of a
// strategy this build lacks).
[[nodiscard]] Result<const DeploymentInfo*> deployment_for(const PredictOptions& o, const Plan& plan) {
  if (!o.deployment.empty()) return REFIT_TRY_IN(find_deployment(o.deployment), "--deployment");
  const auto info = find_strategy(plan.strategy);
  return info ? &default_deployment(**info) : &refit_executors();
}

// A problem with the cluster as its refit runs on it (cache_regime.h): planned, bounded and
// simulated on that, each row saying which regime each cached node ran in.
class Regimed {
 public:
  [[nodiscard]] static Result<Regimed> make(const ReshardProblem& problem, const PlacedCluster& given) {
    return Regimed(problem, given, REFIT_TRY(cache_regime(problem, given)));
  }
  const ReshardProblem& problem() const { return *problem_; }
  const PlacedCluster& cluster() const { return cached_ ? cached_->cluster : *given_; }
  std::span<const std::string> notes() const {
    return cached_ ? std::span<const std::string>(cached_->notes) : std::span<const std::string>();
  }

 private:
  Regimed(const ReshardProblem& problem, const PlacedCluster& given, std::optional<CacheRegime> cached)
      : problem_(&problem), given_(&given), cached_(std::move(cached)) {}
  const ReshardProblem* problem_;
  const PlacedCluster* given_;
  std::optional<CacheRegime> cached_;  // none: the cluster as given
};

struct Planned {
  Plan plan;
  Seconds seconds;
};

// Plans as `o` asks; with o.delta, for a delta refit (PlanOptions::neighbour_relays), so that each
// row's plan is the one whose step it predicts.
[[nodiscard]] Result<Planned> plan_timed(const Regimed& on, std::string_view strategy,
                                         const PredictOptions& o) {
  const auto start = std::chrono::steady_clock::now();
  auto options = o.plan;
  options.neighbour_relays = options.neighbour_relays && !o.delta;
  auto made = REFIT_TRY(plan(on.problem(), on.cluster(), strategy, options));
  return Planned{.plan = std::move(made), .seconds = seconds_since(start)};
}

Bytes moved_bytes(const ReshardProblem& problem, const std::vector<bool>& moved) {
  Bytes sum;
  for (std::size_t t = 0; t < moved.size(); ++t)
    if (moved[t]) sum += problem.tensors()[t].tensor.bytes();
  return sum;
}

// With options.delta, a delta refit's step of the row's plan beside it, where refit's executors run
// it; a note says why not where the delta executor does not take the plan.
[[nodiscard]] Result<void> add_delta(const PredictOptions& o, const ReshardProblem& problem,
                                     const PlacedCluster& cluster, const Plan& p,
                                     const DeploymentInfo& deployment, std::int32_t window, Prediction& row) {
  if (!o.delta || !deployment.no_delta.empty()) return {};
  auto delta = predict_delta(DeltaPredictionInputs{.plan = p,
                                                   .problem = problem,
                                                   .cluster = cluster,
                                                   .deployment = deployment,
                                                   .simulation = {.window = window, .staging = o.staging}},
                             *o.delta);
  if (delta) {
    row.delta = *delta;
    row.notes.push_back(delta_prediction_note(*o.delta, moves_fp8(p)));
    return {};
  }
  if (delta.error().code != ErrorCode::kUnsupported)
    return std::unexpected(std::move(delta).error().in("--delta"));
  row.notes.push_back(fmt::format("--delta: no delta refit of {} as {} runs it: {}", p.strategy,
                                  deployment.name, delta.error().message));
  return {};
}

// The simulation of plan `p` under `so`: by components where options.by_components asks for it and
// that is the whole simulation's (PredictOptions::by_components: refused before simulating
// anything otherwise), whole otherwise.
[[nodiscard]] Result<PlanSimulation> simulate_row(const PredictOptions& o, const Plan& p,
                                                  const ReshardProblem& problem, const PlacedCluster& cluster,
                                                  const PlanSimulationOptions& so) {
  if (o.by_components) {
    auto parts = simulate_plan_by_components(p, problem, cluster, so, DistinctComponents::kRefuse);
    if (!parts && parts.error().code != ErrorCode::kUnsupported)
      return std::unexpected(std::move(parts).error());
    if (parts) return std::move(parts->plan);
  }
  return simulate_plan(p, problem, cluster, so);
}

// `planned` (a plan of `problem`) as `deployment` runs it; `traced`: the row options.trace draws.
[[nodiscard]] Result<Prediction> run_row(const PredictOptions& o, const Regimed& on, const Planned& planned,
                                         const DeploymentInfo& deployment, bool traced) {
  const ReshardProblem& problem = on.problem();
  const PlacedCluster& cluster = on.cluster();
  const Plan& p = planned.plan;
  if (o.window && *o.window < 0) return out_of_range(fmt::format("--window: {} is negative", *o.window));
  const auto schedule =
      REFIT_TRY_IN(deploy(deployment, p, problem, cluster), fmt::format("--deployment {}", deployment.name));
  const ExecutionModel& execution = execution_of(p, {.calls = &schedule});
  if (o.window) REFIT_TRY_IN(check_pair_window(execution, *o.window), "--window");
  const auto window = o.window.value_or(execution.pair_window);
  const Bytes staging = deployment.takes_staging ? o.staging : lowering::kDefaultStaging;
  const auto label = fmt::format("{} as {} runs it", p.strategy, deployment.name);
  PlanSimulationOptions so{.progress = nullptr,
                           .trace = traced ? o.trace : nullptr,
                           .window = window,
                           .calls = &schedule,
                           .staging = staging};
  if (o.progress) so.progress = [&](double done) { o.progress(label, done); };
  const auto start = std::chrono::steady_clock::now();
  const bool part = !schedule.moved_tensors.empty();
  Prediction row{.strategy = p.strategy,
                 .deployment = &deployment,
                 .window = window,
                 .stats = compute_stats(p, cluster),
                 .moves_part = part,
                 .moved_bytes = part ? moved_bytes(problem, schedule.moved_tensors) : problem.total_bytes(),
                 .moved_bound = lower_bound(problem, cluster, schedule.moved_tensors),
                 .sim = REFIT_TRY(simulate_row(o, p, problem, cluster, so)),
                 .plan_seconds = planned.seconds,
                 .simulate_seconds = seconds_since(start),
                 .sensitivity = {},
                 .notes = schedule.notes,
                 .speedup_vs_gather_broadcast = std::nullopt,
                 .time_vs_refit = std::nullopt};
  if (o.sensitivity) {
    const PlanSimulationOptions again{.window = window, .staging = staging};
    row.sensitivity = REFIT_TRY(refit::sensitivity(p, problem, cluster, deployment, again));
  }
  row.notes.insert(row.notes.end(), row.sim.assumptions.begin(), row.sim.assumptions.end());
  row.notes.insert(row.notes.end(), on.notes().begin(), on.notes().end());
  REFIT_TRY(add_delta(o, problem, cluster, p, deployment, window, row));
  return row;
}

// The row of `strategy` as `deployment` runs it, if there is one.
const Prediction* find_row(const std::vector<Prediction>& rows, StrategyId strategy,
                           DeploymentId deployment) {
  const auto it = std::ranges::find_if(rows, [&](const Prediction& r) {
    const auto info = find_strategy(r.strategy);
    return info && (*info)->id == strategy && r.deployment->id == deployment;
  });
  return it == rows.end() ? nullptr : &*it;
}

// Each row's speed-up over gather-broadcast as NeMo RL runs it (today's practice) and its time
// relative to refit as its own executors run it, where those rows are there and the divisor is not
// zero (a problem with no bytes takes refit no time).
void relate(std::vector<Prediction>& rows) {
  const auto* base = find_row(rows, StrategyId::kGatherBroadcast, DeploymentId::kNemoRl);
  const auto* ours = find_row(rows, StrategyId::kRefit, DeploymentId::kRefit);
  const Seconds base_time = base ? base->sim.predicted : Seconds{};
  const Seconds our_time = ours ? ours->sim.predicted : Seconds{};
  for (auto& r : rows) {
    if (base && r.sim.predicted.value > 0) r.speedup_vs_gather_broadcast = base_time / r.sim.predicted;
    if (ours && our_time.value > 0) r.time_vs_refit = r.sim.predicted / our_time;
  }
}

[[nodiscard]] Result<void> check_options(const PredictOptions& o) {
  if (o.delta && !(*o.delta >= 0.0 && *o.delta <= 1.0))
    return out_of_range(fmt::format("--delta: change fraction {} is not in [0, 1]", *o.delta));
  if (o.staging < lowering::kMinStaging)
    return out_of_range(fmt::format("--staging: {} bytes is below the {} bytes one chunk needs",
                                    o.staging.value, lowering::kMinStaging.value));
  return {};
}

// The rows of one strategy in a comparison: as its default deployment runs it, and for NCCL's
// algorithms also as refit's executors would run its plan.
[[nodiscard]] Result<std::vector<Prediction>> strategy_rows(const PredictOptions& o, const StrategyInfo& s,
                                                            const Regimed& asked, const Regimed* receivers,
                                                            bool traced) {
  std::vector<Prediction> rows;
  const auto& deployed = default_deployment(s);
  const bool today = receivers != nullptr && deployed.quantizes_at_receivers;
  const Regimed& on = today ? *receivers : asked;
  const auto planned = REFIT_TRY_IN(plan_timed(on, s.name, o), fmt::format("planning {}", s.name));
  rows.push_back(REFIT_TRY_IN(run_row(o, on, planned, deployed, traced),
                              fmt::format("{} as {} runs it", s.name, deployed.name)));
  if (today) rows.back().notes.emplace_back(kReceiverNote);
  // Beside a baseline of NCCL's algorithms, its plan as refit's executors would run it (the
  // algorithm without the deployed code's calls); gather-broadcast's plan is refit's own
  // strawman of the algorithm, so it has no such row.
  if (!s.nccl_m2n) return rows;
  // The problem as asked: planned again only where the deployed row ran the receivers' problem
  // (a copy of a million-transfer plan costs as much as a good part of planning it).
  std::optional<Planned> replanned;
  if (today) replanned = REFIT_TRY_IN(plan_timed(asked, s.name, o), fmt::format("planning {}", s.name));
  rows.push_back(REFIT_TRY_IN(run_row(o, asked, replanned ? *replanned : planned, refit_executors(), false),
                              fmt::format("{} as {} runs it", s.name, refit_executors().name)));
  return rows;
}

}  // namespace

Result<Predictions> predict(const PredictionInputs& in, const PredictOptions& o,
                            const std::optional<Plan>& given) {
  REFIT_TRY(check_options(o));
  const auto asked = REFIT_TRY(Regimed::make(in.problem, in.cluster));
  Predictions out{
      .cluster = in.cluster.name(), .bound = lower_bound(in.problem, asked.cluster()), .rows = {}};
  const Planned planned =
      given ? Planned{.plan = *given, .seconds = Seconds{}} : REFIT_TRY(plan_timed(asked, o.strategy, o));
  const DeploymentInfo* deployment = REFIT_TRY(deployment_for(o, planned.plan));
  // A plan file is what moves: a baseline's plan that quantizes before the engines is nothing the
  // deployed code runs, so refit's executors run it.
  const bool fp8_plan = given && deployment->quantizes_at_receivers && quantizes_before_engines(planned.plan);
  if (fp8_plan) deployment = &refit_executors();
  const auto receivers =
      deployment->quantizes_at_receivers && !given ? REFIT_TRY(at_receivers(in.source)) : std::nullopt;
  if (receivers) {
    const auto on = REFIT_TRY(Regimed::make(*receivers, in.cluster));
    const auto today = REFIT_TRY(plan_timed(on, o.strategy, o));
    out.rows.push_back(REFIT_TRY(run_row(o, on, today, *deployment, true)));
    out.rows.back().notes.emplace_back(kReceiverNote);
  } else {
    out.rows.push_back(REFIT_TRY(run_row(o, asked, planned, *deployment, true)));
  }
  if (fp8_plan) out.rows.back().notes.emplace_back(kFp8PlanNote);
  if (o.delta && !deployment->no_delta.empty())
    out.rows.back().notes.push_back(
        fmt::format("--delta: not as {} runs it: {}", deployment->name, deployment->no_delta));
  relate(out.rows);
  return out;
}

Result<Predictions> compare(const PredictionInputs& in, const PredictOptions& o) {
  REFIT_TRY(check_options(o));
  if (o.jobs < 0) return out_of_range(fmt::format("--jobs: {} is negative", o.jobs));
  const StrategyInfo* chosen = REFIT_TRY_IN(find_strategy(o.strategy), "--strategy");
  const auto asked = REFIT_TRY(Regimed::make(in.problem, in.cluster));
  Predictions out{
      .cluster = in.cluster.name(), .bound = lower_bound(in.problem, asked.cluster()), .rows = {}};
  const auto receivers = REFIT_TRY(at_receivers(in.source));
  std::optional<Regimed> today;
  if (receivers) today = REFIT_TRY(Regimed::make(*receivers, in.cluster));
  const auto all = strategies();
  std::vector<Result<std::vector<Prediction>>> by_strategy(all.size());
  detail::in_parallel(all.size(), detail::threads_for(o.jobs), [&](std::size_t i) {
    by_strategy[i] = strategy_rows(o, all[i], asked, today ? &*today : nullptr, &all[i] == chosen);
  });
  for (auto& rows : by_strategy)
    for (auto& row : REFIT_TRY(std::move(rows))) out.rows.push_back(std::move(row));
  relate(out.rows);
  return out;
}

}  // namespace refit
