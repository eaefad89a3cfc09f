#pragma once
// refit's front door: one include for a program that plans, predicts or performs the transfer of
// sharded weights from a training layout to an inference layout.
//
// ```
// #include <refit/refit.h>
// auto problem = refit::load_problem({.model = "deepseek-v3", .train = "pp=16,ep=16",
//                                     .infer = "tp=32,engines=8"});
// auto cluster = refit::load_cluster({.preset = "dgx-h100"}, refit::job_of(*problem));
// auto plan = refit::plan(*problem, cluster->placed, "refit");
// auto prediction = refit::simulate_plan(*plan, *problem, cluster->placed);
// ```
//
// and a baseline as a deployed system runs it (deployment.h):
//
// ```
// auto calls = refit::deploy(refit::deployment_info(refit::DeploymentId::kNemoRl), *baseline, *problem,
//                            cluster->placed);
// auto deployed = refit::simulate_plan(*baseline, *problem, cluster->placed, {.calls = &*calls});
// ```
//
// and, in each process of a job (see examples/):
//
// ```
// auto executor = refit::make_executor("ucx", bootstrap, refit::ExecutorOptions{});
// auto report = refit::run(**executor, *plan, my_rank, my_buffers);
// ```
//
// Everything returns a Result: the error says what kind of failure it is and names the input;
// REFIT_TRY (refit/core/try.h) passes errors on in one line.
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/try.h"
#include "refit/executors/delta_executor.h"
#include "refit/executors/executor.h"
#include "refit/executors/host_shards.h"
#include "refit/executors/registry.h"
#include "refit/facade/cluster_source.h"
#include "refit/facade/problem_source.h"
#include "refit/facade/report_json.h"
#include "refit/facade/sweep.h"
#include "refit/lowering/explain.h"
#include "refit/planner/links.h"
#include "refit/planner/plan_json.h"
#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/deployment.h"
#include "refit/simulator/plan_simulation.h"
#include "refit/simulator/sensitivity.h"
#include "refit/topology/rank_map.h"

namespace refit {

// Plans with the named strategy and checks the plan against the problem (validate()): a plan a
// strategy gets wrong is a bug (kInternal), never handed on.
[[nodiscard]] Result<Plan> plan(const ReshardProblem& problem, const PlacedCluster& cluster,
                                std::string_view strategy = strategy_info(kDefaultStrategy).name,
                                const PlanOptions& options = {});

// A plan file (refit plan --out, Plan.save), checked as data rather than trusted by its label:
// against the problem (validate) and the cluster (check_links), and its strategy and execution
// model against its transfers. A baseline's deployment is modelled for that baseline's own plan,
// so a plan that names a baseline (direct, m2n-ring, gather-broadcast) must be the plan that
// strategy makes of this problem on this cluster; any other plan is run as refit's executors run
// it, so it names refit (or a strategy this build lacks) and one of refit's execution models.
// Errors start with "--plan <path>" and name what does not fit.
[[nodiscard]] Result<Plan> load_plan(const std::string& path, const ReshardProblem& problem,
                                     const PlacedCluster& cluster);

// A delta refit's re-balance by the bytes that move (docs/delta.md): every rank re-plans `problem`
// on `cluster` with `strategy` and `options`, weighed by a step's payloads, once their shares over
// the tensors drift past `max_drift` (DeltaRebalance's default when not given). What `refit run
// --delta` and the Python package's Executor(delta=True) hand the DeltaExecutor.
[[nodiscard]] DeltaRebalance delta_rebalance(ReshardProblem problem, PlacedCluster cluster,
                                             std::string strategy, PlanOptions options,
                                             double max_drift = DeltaRebalance{}.max_drift);

// Prepares the plan on the executor for this process's rank and executes it once. A job that
// refits every step prepares once and executes again instead (Executor::prepare, execute).
[[nodiscard]] Result<ExecutionReport> run(Executor& executor, const Plan& plan, Rank rank,
                                          const RankBuffers& buffers);

}  // namespace refit
