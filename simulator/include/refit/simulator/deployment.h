#pragma once
// Who runs a plan, and so how a refit is cut into calls: a deployment turns a plan into a
// CallSchedule (calls.h) that the plan simulation runs. Each deployment is modelled on the code
// of the system it names, function by function (docs/deployed_refit.md):
//   refit      refit's executors: the whole plan as one call (any strategy's plan);
//   nemo-rl    NeMo RL's refit paths: gather-broadcast as its default collective refit
//              (Megatron-Bridge export, packed buffers, one NCCL broadcast per buffer over all
//              ranks), m2n-ring and direct through nccl_reshard (one M2N reshard per FFN
//              parameter on its pipeline stage's communicator, then the rest through the
//              packed broadcast); before either, the driver's Ray fan-out to every training
//              worker and every vLLM TP group's leader;
//   m2n-bench  nccl_m2n's reshard_model_bench: every parameter through M2N, one representative
//              per (name pattern, stage), patterns one after another;
//   m2n-bench-all  the same run with --no-dedup: every layer's parameters, each stage's in turn;
//   refit-nccl  refit's NCCL executor: the whole plan as one call, step by step.
// Every constant is a microbenchmark figure or a published cost model with its source in
// docs/hardware.md; none is fitted to an end-to-end refit time.
#include <span>
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/calls.h"
#include "refit/simulator/nccl_cost_model.h"
#include "refit/topology/rank_map.h"

namespace refit {

enum class DeploymentId : std::uint8_t { kRefit, kNemoRl, kM2nBench, kM2nBenchAll, kRefitNccl };

struct DeploymentConstants {
  NcclLatencies nccl{};
  // Bus bandwidth NCCL reaches on a ring that crosses NICs, as a fraction of the NICs' effective
  // bandwidth (47 GB/s per 400 Gb/s NIC): nccl-tests on 4 x 8 H100 with 8 x 400 Gb/s per node
  // give broadcast 286.34 GB/s and all-gather 323.53 GB/s of bus bandwidth, against 8 x 47.
  double network_broadcast_efficiency = 286.34 / 376.0;
  double network_all_gather_efficiency = 323.53 / 376.0;
  // On a ring inside one NVLink domain: NCCL's maintainers give ~370 GB/s for non-NVLS
  // collectives on H100 NVLink, the effective NVLink bandwidth the presets already use.
  double nvlink_efficiency = 1.0;
  // Host cost of launching one kernel or one NCCL call: cuLaunchKernel of an empty kernel on
  // GB200, 3.0 us (no H100 figure was found).
  Seconds launch{3.0e-6};
  // Host cost of one eager PyTorch op: one clone() through the dispatcher on B200, 4.72 us.
  Seconds torch_op{4.72e-6};
  // vLLM load_weights, per tensor of a packed buffer: split view, view(dtype), reshape, the
  // weight loader's narrow and copy_ (docs/deployed_refit.md, A1): five eager ops.
  std::int32_t load_weights_ops = 5;
  // NeMo RL's packed buffers: min(fraction x training GPU memory, cap), two of them in flight.
  double buffer_memory_fraction = 0.02;
  Bytes buffer_cap{Bytes{5} * (std::int64_t{1} << 30)};
  std::int32_t buffers = 2;
  // NeMo RL's nccl_reshard: pipeline stages an inference rank keeps in flight.
  std::int32_t stages_in_flight = 2;
  // Ray, from Ray's release microbenchmark (`ray microbenchmark` on one m5.16xlarge;
  // docs/hardware.md, "Ray"): the round trip of one synchronous actor call, 1 / (1,950-2,012
  // calls/s) (`1_1_actor_calls_sync`), and one asynchronous actor call when one caller fans out
  // to many actors, 1 / (8,038-8,575 calls/s) (`1_n_actor_calls_async`).
  Seconds ray_round_trip{0.50e-3};
  Seconds ray_async_call{0.12e-3};
};

namespace sim {
struct DeployInputs;
}

// A deployment carries its own rules and behaviour, as a protocol table entry does: which plans it
// runs, whose plans it runs unless told otherwise, how it cuts a plan into calls, and what it
// moves. Nothing outside the table asks which deployment it is.
struct DeploymentInfo {
  DeploymentId id = DeploymentId::kRefit;
  std::string_view name;         // "refit", "nemo-rl", "m2n-bench", "m2n-bench-all", "refit-nccl"
  std::string_view description;  // one line for --help
  // Whether it runs a plan of `strategy` (nullptr: a strategy this build lacks).
  bool (*runs)(const StrategyInfo* strategy) = nullptr;
  // Whether it is who runs `strategy`'s plans unless told otherwise: one entry per strategy.
  bool (*runs_by_default)(const StrategyInfo& strategy) = nullptr;
  // The calls it cuts a plan it runs into.
  Result<CallSchedule> (*calls)(const sim::DeployInputs& in) = nullptr;
  // The deployed code moves bf16 and quantizes on the inference side (NeMo RL quantizes at the
  // receivers): an FP8 refit quantized before the engines is nothing it runs.
  bool quantizes_at_receivers = false;
  // Why a delta refit (only what changed since the last moves) is not predicted as it runs it;
  // empty where it is (refit's executors, as the UCX delta executor and its CPU codec run it).
  std::string_view no_delta;
  // Why an elastic refit (a refit of some engines, a join, a repair after a failure) is not
  // predicted as it runs it; empty where it is (refit's executors, which perform them).
  std::string_view no_elastic;
  // Whether refit's staging (ExecutorOptions::staging, --staging) sets its chunks: refit's
  // executors; deployed code keeps its own buffers, predicted at the default staging.
  bool takes_staging = false;
};

// Every deployment, in DeploymentId order.
std::span<const DeploymentInfo> deployments();
const DeploymentInfo& deployment_info(DeploymentId id);
// kNotFound naming the known deployments.
[[nodiscard]] Result<const DeploymentInfo*> find_deployment(std::string_view name);
// Who runs a strategy's plans unless told otherwise: refit's executors for refit, NeMo RL for
// the baselines.
const DeploymentInfo& default_deployment(const StrategyInfo& strategy);
// refit's executors: they run any plan, also one of a strategy this build lacks.
const DeploymentInfo& refit_executors();
// kUnsupported naming both when the deployment cannot run the strategy's plans (NeMo RL does not
// run refit's, reshard_model_bench runs M2N only).
[[nodiscard]] Result<void> check_runs(const DeploymentInfo& deployment, const StrategyInfo& strategy);

// The calls `deployment` cuts `plan` into. Refuses what the deployed code refuses or cannot be
// read off the problem (training stages of unequal size, a transfer mixing tensors of two calls),
// naming it; what it had to assume (NeMo RL's buffer size on a GPU of unknown memory) is in the
// schedule's notes.
[[nodiscard]] Result<CallSchedule> deploy(const DeploymentInfo& deployment, const Plan& plan,
                                          const ReshardProblem& problem, const PlacedCluster& cluster,
                                          const DeploymentConstants& constants = {});

}  // namespace refit
