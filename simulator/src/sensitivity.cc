#include "refit/simulator/sensitivity.h"

#include <algorithm>
#include <functional>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/topology/measured_kernels.h"

namespace refit {
namespace {

// Scales one constant by `factor`, in the cluster or in the deployment's constants.
struct Knob {
  std::string_view name;
  std::function<void(ClusterSpec&, DeploymentConstants&, double factor)> scale;
};

NcclLatencies scaled(NcclLatencies l, double f) {
  for (Seconds* s : {&l.base, &l.base_ll_tree, &l.nvlink_hop, &l.nvlink_ring_step, &l.network_hop,
                     &l.network_overhead, &l.nvlink_ll_tree, &l.network_ll_tree})
    *s = *s * f;
  return l;
}

double efficiency(double e, double f) { return std::min(1.0, e * f); }

std::vector<Knob> knobs() {
  return {
      {"NIC bandwidth",
       [](ClusterSpec& c, DeploymentConstants&, double f) {
         for (auto& n : c.nics) n.bandwidth = n.bandwidth * f;
       }},
      {"NIC latency",
       [](ClusterSpec& c, DeploymentConstants&, double f) {
         // All are the NIC's fixed costs, per message, per chunk and per transfer: measured
         // overheads move with the latency (the knob keeps its name, which outputs carry).
         for (auto& n : c.nics) {
           n.latency = n.latency * f;
           n.chunk_overhead = n.chunk_overhead * f;
           n.transfer_overhead = n.transfer_overhead * f;
         }
       }},
      {"NVLink bandwidth",
       [](ClusterSpec& c, DeploymentConstants&, double f) {
         for (auto& g : c.gpus) g.nvlink_bandwidth = g.nvlink_bandwidth * f;
       }},
      {"device copy bandwidth",
       [](ClusterSpec& c, DeploymentConstants&, double f) {
         // The quantizer is memory-bound as the copies are: a measured rate moves with them.
         for (auto& g : c.gpus) {
           g.copy_bandwidth = g.copy_bandwidth * f;
           for (auto& rate : g.quantize_bandwidth) rate = rate * f;
         }
       }},
      {"NCCL latencies (tuning.cc)",
       [](ClusterSpec&, DeploymentConstants& k, double f) { k.nccl = scaled(k.nccl, f); }},
      {"NCCL broadcast efficiency",
       [](ClusterSpec&, DeploymentConstants& k, double f) {
         k.network_broadcast_efficiency = efficiency(k.network_broadcast_efficiency, f);
       }},
      {"NCCL all-gather efficiency",
       [](ClusterSpec&, DeploymentConstants& k, double f) {
         k.network_all_gather_efficiency = efficiency(k.network_all_gather_efficiency, f);
       }},
      {"kernel launch",
       [](ClusterSpec& c, DeploymentConstants& k, double f) {
         // refit's NCCL executor's costs per step and per operation are its launches too.
         k.launch = k.launch * f;
         for (auto& g : c.gpus) {
           const NcclCosts n = charged_nccl_costs(g);
           g.nccl_costs = NcclCosts{.per_op = n.per_op * f, .per_step = n.per_step * f};
         }
       }},
      {"eager PyTorch op",
       [](ClusterSpec&, DeploymentConstants& k, double f) { k.torch_op = k.torch_op * f; }},
      {"Ray dispatch",
       [](ClusterSpec&, DeploymentConstants& k, double f) {
         k.ray_round_trip = k.ray_round_trip * f;
         k.ray_async_call = k.ray_async_call * f;
       }},
      {"NeMo RL buffer size",
       [](ClusterSpec&, DeploymentConstants& k, double f) {
         k.buffer_memory_fraction *= f;
         k.buffer_cap = Bytes{static_cast<std::int64_t>(static_cast<double>(k.buffer_cap.value) * f)};
       }},
  };
}

Result<Seconds> predict(const Plan& plan, const ReshardProblem& problem, const PlacedCluster& cluster,
                        const DeploymentInfo& deployment, const PlanSimulationOptions& options,
                        const Knob& knob, double factor) {
  ClusterSpec spec = cluster.cluster().spec();
  DeploymentConstants constants;
  knob.scale(spec, constants, factor);
  auto scaled_cluster =
      REFIT_TRY(PlacedCluster::make(REFIT_TRY(Cluster::make(std::move(spec))), cluster.ranks()));
  const auto schedule = REFIT_TRY(deploy(deployment, plan, problem, scaled_cluster, constants));
  PlanSimulationOptions o = options;
  o.calls = &schedule;
  return REFIT_TRY(simulate_plan(plan, problem, scaled_cluster, o)).predicted;
}

}  // namespace

Result<std::vector<Sensitivity>> sensitivity(const Plan& plan, const ReshardProblem& problem,
                                             const PlacedCluster& cluster, const DeploymentInfo& deployment,
                                             const PlanSimulationOptions& options, double step) {
  if (!(step > 0 && step < 1))
    return out_of_range(fmt::format("sensitivity step must be in (0, 1), got {}", step));
  std::vector<Sensitivity> out;
  for (const auto& knob : knobs()) {
    const auto context = [&] { return fmt::format("sensitivity to {}", knob.name); };
    out.push_back(Sensitivity{
        .constant = std::string(knob.name),
        .lower =
            REFIT_TRY_IN(predict(plan, problem, cluster, deployment, options, knob, 1 - step), context()),
        .higher =
            REFIT_TRY_IN(predict(plan, problem, cluster, deployment, options, knob, 1 + step), context())});
  }
  return out;
}

}  // namespace refit
