#include "refit/simulator/deployment.h"
#include "refit/core/index.h"
#include "refit/core/named_table.h"

#include <algorithm>
#include <array>
#include <map>
#include <numeric>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "refit/core/try.h"

#include "call_builder.h"
#include "m2n_calls.h"
#include "packed_broadcast.h"
#include "ray_dispatch.h"
#include "training_export.h"

namespace refit {
namespace {

using sim::DeployInputs;

// The whole plan in one call, run as `model` runs it.
CallSchedule one_call(const DeployInputs& in, const ExecutionModel& model) {
  Call call{.label = "the plan", .group = "refit execute"};
  call.transfers.resize(in.plan.transfers.size());
  std::iota(call.transfers.begin(), call.transfers.end(), 0);
  return CallSchedule{
      .calls = {std::move(call)}, .pairs_share_by_bytes = model.pairs_share_by_bytes, .execution = &model};
}

Result<CallSchedule> whole_plan(const DeployInputs& in) {
  return one_call(in, refit_executor_model(execution_model(in.plan.execution)));
}

Result<CallSchedule> nccl_executor(const DeployInputs& in) {
  return one_call(in, execution_model(ExecutionModelId::kRefitNccl));
}

std::vector<std::int32_t> all_tensors(const ReshardProblem& problem) {
  std::vector<std::int32_t> tensors(problem.tensors().size());
  std::iota(tensors.begin(), tensors.end(), 0);
  return tensors;
}

// NeMo RL's default non-colocated refit: every tensor through the packed broadcast.
Result<CallSchedule> nemo_rl_collective(const DeployInputs& in) {
  const auto stages = REFIT_TRY(sim::find_stages(in.problem));
  CallSchedule schedule{.quantize_landed = false};
  sim::add_packed_broadcast(in, stages, all_tensors(in.problem), {}, {}, schedule);
  return schedule;
}

// NeMo RL's nccl_reshard: per training stage, one M2N call per bulk parameter on that stage's
// communicator (queue = stage), an inference rank keeping `stages_in_flight` stages in flight;
// then, after every stage, the other parameters through the packed broadcast.
Result<CallSchedule> nemo_rl_reshard(const DeployInputs& in) {
  const auto stages = REFIT_TRY(sim::find_stages(in.problem));
  const auto by_tensor = REFIT_TRY(sim::transfers_by_tensor(in.plan));
  const auto stage_count = static_cast<std::int32_t>(stages.ranks.size());
  std::vector<std::vector<std::int32_t>> bulk(at(stage_count));
  std::vector<std::int32_t> misc;
  for (const std::int32_t t : all_tensors(in.problem)) {
    if (sim::is_bulk_parameter(in.problem.tensors()[at(t)].tensor.name))
      bulk[at(stages.stage_of_tensor[at(t)])].push_back(t);
    else
      misc.push_back(t);
  }
  CallSchedule schedule{.store_and_forward = true,
                        .relay_slices = sim::kM2nCtas,
                        .pairs_in_order = true,
                        .quantize_landed = false};
  std::vector<std::int32_t> last(at(stage_count), -1);
  const std::int32_t in_flight = in.constants.stages_in_flight;
  for (std::int32_t s = 0; s < stage_count; ++s) {
    for (const std::int32_t t : bulk[at(s)]) {
      for (Call& call : sim::reshard_calls(in, t, by_tensor[at(t)], stages.ranks[at(s)], s, true)) {
        if (last[at(s)] < 0 && s >= in_flight && last[at(s - in_flight)] >= 0)
          call.after = {last[at(s - in_flight)]};
        last[at(s)] = sim::add_call(schedule, std::move(call));
      }
    }
  }
  std::erase(last, -1);
  sim::add_packed_broadcast(
      in, stages, misc, last,
      {.exporting = stage_count, .broadcast = stage_count + 1, .unpack = stage_count + 2}, schedule);
  // The row's byte counts come from the plan; these tensors do not follow it.
  if (!misc.empty())
    schedule.notes.push_back(fmt::format(
        "{} of the {} tensors, those not named as bulk parameters, move through NeMo RL's packed broadcast "
        "instead of the {} plan: the row's plan counts (network_bytes, nvlink_bytes, max_nic_*_bytes, "
        "transfers) move them as the plan would, the traffic simulated is in its resources",
        misc.size(), in.problem.tensors().size(), in.plan.strategy));
  return schedule;
}

// reshard_model_bench's pattern: the name with each layer number replaced (`layers.N.` ->
// `layers.X.`), in one pass over the name: no regex, whose matcher recursed once per digit and
// overflowed the stack on a name with 100k of them.
std::string pattern_of(std::string_view name) {
  constexpr std::string_view kLayers = "layers.";
  const auto digit = [](char c) { return c >= '0' && c <= '9'; };
  std::string out;
  out.reserve(name.size());
  std::size_t i = 0;
  while (i < name.size()) {
    if (name.substr(i, kLayers.size()) == kLayers) {
      std::size_t end = i + kLayers.size();
      while (end < name.size() && digit(name[end])) ++end;
      if (end > i + kLayers.size() && end < name.size() && name[end] == '.') {
        out += "layers.X.";
        i = end + 1;
        continue;
      }
    }
    out.push_back(name[i++]);
  }
  return out;
}

// What the de-duplicated benchmark moves: its representatives, a part of the model, and a note
// saying so (its figure is that part's time; the bound to judge it by is that part's).
void note_representatives(
    const ReshardProblem& problem,
    const std::map<std::string, std::map<std::int32_t, std::vector<std::int32_t>>>& timed,
    CallSchedule& schedule) {
  std::vector<bool> moved(problem.tensors().size(), false);
  Bytes bytes;
  std::size_t count = 0;
  for (const auto& [pattern, stages] : timed)
    for (const auto& [stage, tensors] : stages)
      for (const std::int32_t t : tensors) {
        moved[at(t)] = true;
        bytes += problem.tensors()[at(t)].tensor.bytes();
        ++count;
      }
  if (count == moved.size()) return;  // every tensor is its pattern's only one on its stage
  schedule.moved_tensors = std::move(moved);
  schedule.notes.push_back(fmt::format(
      "m2n-bench times one representative parameter per layer pattern and stage, as reshard_model_bench does "
      "by default: {} of the {} tensors, {} of {} bytes; its figure is their time (m2n-bench-all times every "
      "layer)",
      count, problem.tensors().size(), bytes.value, problem.total_bytes().value));
}

// reshard_model_bench: per name pattern, the parameters of each stage one after another on that
// stage's communicator (the stages' in parallel), the patterns one after another; its figure is
// the sum over patterns. With its default de-duplication (`deduplicateParamsPP`) one
// representative parameter per (pattern, stage); with --no-dedup (`all_layers`) every one.
Result<CallSchedule> m2n_bench(const DeployInputs& in, bool all_layers) {
  const auto stages = REFIT_TRY(sim::find_stages(in.problem));
  const auto by_tensor = REFIT_TRY(sim::transfers_by_tensor(in.plan));
  std::vector<std::string> patterns;
  std::map<std::string, std::map<std::int32_t, std::vector<std::int32_t>>>
      timed;  // pattern -> stage -> tensors
  for (const std::int32_t t : all_tensors(in.problem)) {
    const auto pattern = pattern_of(in.problem.tensors()[at(t)].tensor.name);
    if (!timed.contains(pattern)) patterns.push_back(pattern);
    auto& tensors = timed[pattern][stages.stage_of_tensor[at(t)]];
    if (all_layers || tensors.empty()) tensors.push_back(t);
  }
  CallSchedule schedule{.store_and_forward = true,
                        .relay_slices = sim::kM2nCtas,
                        .pairs_in_order = true,
                        .quantize_landed = false};
  if (!all_layers) note_representatives(in.problem, timed, schedule);
  std::vector<std::int32_t> previous;
  for (const auto& pattern : patterns) {
    std::vector<std::int32_t> calls;
    for (const auto& [stage, tensors] : timed[pattern]) {
      std::int32_t last = -1;
      for (const std::int32_t t : tensors)
        for (Call& call :
             sim::reshard_calls(in, t, by_tensor[at(t)], stages.ranks[at(stage)], stage, false)) {
          if (last < 0) call.after = previous;
          last = sim::add_call(schedule, std::move(call));
        }
      calls.push_back(last);
    }
    previous = std::move(calls);
  }
  return schedule;
}

// NeMo RL: M2N's algorithms through nccl_reshard, the rest through its packed broadcast; before
// either, the driver's Ray fan-out.
Result<CallSchedule> nemo_rl(const DeployInputs& in) {
  auto schedule = REFIT_TRY(in.strategy.nccl_m2n ? nemo_rl_reshard(in) : nemo_rl_collective(in));
  sim::note_engine_cast(schedule);
  sim::add_ray_dispatch(in.problem, in.constants, schedule);
  return schedule;
}

bool any_plan(const StrategyInfo*) { return true; }
bool a_baseline(const StrategyInfo* s) { return s && s->baseline; }
bool an_m2n_algorithm(const StrategyInfo* s) { return s && s->nccl_m2n; }
bool refit_own(const StrategyInfo& s) { return !s.baseline; }
bool baseline(const StrategyInfo& s) { return s.baseline; }
bool never(const StrategyInfo&) { return false; }

constexpr std::string_view kEveryByte = "it moves every byte every step; a delta refit is refit's executors'";
constexpr std::string_view kEveryEngine =
    "it refits every engine from the training ranks; a refit of some engines, a join and a repair are "
    "refit's executors' (--deployment refit)";

constexpr std::array<DeploymentInfo, 5> kDeployments{{
    {.id = DeploymentId::kRefit,
     .name = "refit",
     .description = "refit's executors: the whole plan in one call",
     .runs = any_plan,
     .runs_by_default = refit_own,
     .calls = whole_plan,
     .takes_staging = true},
    {.id = DeploymentId::kNemoRl,
     .name = "nemo-rl",
     .description =
         "NeMo RL: gather-broadcast as packed NCCL broadcasts, m2n-ring and direct through nccl_reshard",
     .runs = a_baseline,
     .runs_by_default = baseline,
     .calls = nemo_rl,
     .quantizes_at_receivers = true,
     .no_delta = kEveryByte,
     .no_elastic = kEveryEngine},
    {.id = DeploymentId::kM2nBench,
     .name = "m2n-bench",
     .description = "nccl_m2n's reshard_model_bench: every parameter through M2N, one name pattern at a time",
     .runs = an_m2n_algorithm,
     .runs_by_default = never,
     .calls = [](const DeployInputs& in) { return m2n_bench(in, /*all_layers=*/false); },
     .quantizes_at_receivers = true,
     .no_delta = kEveryByte,
     .no_elastic = kEveryEngine},
    {.id = DeploymentId::kM2nBenchAll,
     .name = "m2n-bench-all",
     .description = "reshard_model_bench --no-dedup: as m2n-bench, timing every layer instead of one per "
                    "pattern and stage (the figures nccl_m2n's README publishes)",
     .runs = an_m2n_algorithm,
     .runs_by_default = never,
     .calls = [](const DeployInputs& in) { return m2n_bench(in, /*all_layers=*/true); },
     .quantizes_at_receivers = true,
     .no_delta = kEveryByte,
     .no_elastic = kEveryEngine},
    {.id = DeploymentId::kRefitNccl,
     .name = "refit-nccl",
     .description = "refit's NCCL executor (refit run --executor nccl): the whole plan in one call, step "
                    "by step",
     .runs = any_plan,
     .runs_by_default = never,
     .calls = nccl_executor,
     .no_delta = "a delta refit is predicted as the UCX executor runs it (its CPU codec), not as the "
                 "NCCL executor's GPU kernels do (deployment refit)",
     .takes_staging = true},
}};

}  // namespace

std::span<const DeploymentInfo> deployments() { return kDeployments; }

const DeploymentInfo& deployment_info(DeploymentId id) { return kDeployments[static_cast<std::size_t>(id)]; }

Result<const DeploymentInfo*> find_deployment(std::string_view name) {
  if (const auto* entry = find_named(kDeployments, name, &DeploymentInfo::name)) return entry;
  return not_found(fmt::format("unknown deployment '{}' (expected {})", name,
                               names_of(kDeployments, &DeploymentInfo::name)));
}

const DeploymentInfo& default_deployment(const StrategyInfo& strategy) {
  return *std::ranges::find_if(kDeployments,
                               [&](const DeploymentInfo& d) { return d.runs_by_default(strategy); });
}

const DeploymentInfo& refit_executors() { return deployment_info(DeploymentId::kRefit); }

Result<void> check_runs(const DeploymentInfo& deployment, const StrategyInfo& strategy) {
  if (deployment.runs(&strategy)) return {};
  return unsupported(fmt::format("deployment '{}' does not run strategy '{}' ({})", deployment.name,
                                 strategy.name, deployment.description));
}

Result<CallSchedule> deploy(const DeploymentInfo& deployment, const Plan& plan, const ReshardProblem& problem,
                            const PlacedCluster& cluster, const DeploymentConstants& constants) {
  const auto known = find_strategy(plan.strategy);
  if (!known && !deployment.runs(nullptr)) return std::unexpected(known.error());
  if (known) REFIT_TRY(check_runs(deployment, **known));
  // A plan of a strategy this build lacks is run as refit's own (by a deployment that runs any).
  const StrategyInfo& strategy = known ? **known : strategy_info(kDefaultStrategy);
  const DeployInputs in{
      .plan = plan, .problem = problem, .cluster = cluster, .constants = constants, .strategy = strategy};
  return deployment.calls(in);
}

}  // namespace refit
