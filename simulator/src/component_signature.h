#pragma once
// What a component's simulation depends on, with its ranks, GPUs, NICs and domains renumbered in
// order of first appearance: two components with equal signatures build the same flow model (the
// same tasks, resources of the same capacities, in the same order) up to those names, so one
// simulation serves both. It holds, per transfer in plan order, its renumbered ends, link, bytes,
// chunk and segments (tensor, box, `via` within the component), and the boxes that both ends
// hold of each segment's tensor on either side (they decide packing and zero-copy); per rank
// first met, whether it trains and its GPU; per GPU first met, its NVLink and copy bandwidths,
// the NIC bandwidth it reaches (whether its copy engine can bind), its NIC and its domain; per
// NIC its bandwidth and latency; per domain, with an oversubscribed fabric, its uplinks' share.
// The cluster-wide NVLink latency and the tensors' specs are the same for every component.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

// What every signature of one plan reads alike, worked out once: each GPU's NIC bandwidth, and
// each tensor's mesh positions by rank on either side (a mesh lists its ranks in any order, and
// finding one is a scan), made when a signature first asks for them.
class SignatureContext {
 public:
  SignatureContext(const ReshardProblem& problem, const PlacedCluster& cluster);
  const ReshardProblem& problem() const { return problem_; }
  const PlacedCluster& cluster() const { return cluster_; }
  double nic_bandwidth_of_gpu(GpuId g) const { return reach_[static_cast<std::size_t>(g.value)]; }
  // Rank r's position in tensor t's source (or destination) mesh; nothing when it is not in it.
  std::optional<std::int64_t> position(std::uint32_t tensor, bool source, Rank r);

 private:
  const ReshardProblem& problem_;
  const PlacedCluster& cluster_;
  std::vector<double> reach_;                         // per GPU: bandwidth of the NICs that serve it
  std::vector<std::vector<std::int32_t>> positions_;  // [2 * tensor + source] -> by rank, -1: none
};

std::vector<std::int64_t> component_signature(const Plan& plan, std::span<const std::int32_t> ids,
                                              SignatureContext& context);

}  // namespace refit::sim
