#pragma once
// What a component's simulation depends on, with its ranks, GPUs, NICs and domains renumbered in
// order of first appearance: two components with equal signatures build the same flow model (the
// same tasks, resources of the same capacities, in the same order) up to those names, so one
// simulation serves both. It holds, per transfer in plan order, its renumbered ends, link,
// whether its sender's thread copies it (the network within a node), bytes, chunk and segments (tensor, box,
// `via` within the component), and the boxes that both ends hold of each segment's tensor on either side
// (they decide packing and zero-copy); per rank first met, whether it trains and its GPU; per GPU first met,
// its NVLink and copy bandwidths, the NIC bandwidth it reaches (whether its copy engine can bind), its
// quantize rate per FP8 format, its NIC and its domain; per NIC its bandwidth and latency; per domain, with
// an oversubscribed fabric, its uplinks' share. The cluster-wide NVLink latency and the tensors' specs are
// the same for every component.
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit::sim {

// What every signature of one plan reads alike, worked out once: each GPU's NIC bandwidth, and
// each tensor's mesh positions by rank on either side (a mesh lists its ranks in any order, and
// finding one is a scan), made when a signature first asks for them. Tensors whose meshes list
// the same ranks in the same order share one array of positions: a model's many tensors sit on a
// few meshes, and an array per tensor and side grows with tensors x world.
class SignatureContext {
 public:
  SignatureContext(const ReshardProblem& problem, const PlacedCluster& cluster);
  const ReshardProblem& problem() const { return problem_; }
  const PlacedCluster& cluster() const { return cluster_; }
  double nic_bandwidth_of_gpu(GpuId g) const { return reach_[static_cast<std::size_t>(g.value)]; }
  // Rank r's position in tensor t's source (or destination) mesh; nothing when it is not in it.
  std::optional<std::int64_t> position(std::uint32_t tensor, bool source, Rank r);

 private:
  // Orders rank lists by their contents, so equal lists find one entry.
  struct ByRanks {
    bool operator()(const std::vector<Rank>* a, const std::vector<Rank>* b) const { return *a < *b; }
  };

  const ReshardProblem& problem_;
  const PlacedCluster& cluster_;
  std::vector<double> reach_;               // per GPU: bandwidth of the NICs that serve it
  std::vector<std::int32_t> positions_of_;  // [2 * tensor + source] -> into positions_, -1: not made yet
  std::map<const std::vector<Rank>*, std::size_t, ByRanks> by_ranks_;  // a mesh's ranks -> into positions_
  std::vector<std::vector<std::int32_t>> positions_;                   // by rank, -1: not in the mesh
};

// The signature of the component of transfers `ids` (ascending), whole: what others are checked
// against.
std::vector<std::int64_t> component_signature(const Plan& plan, std::span<const std::int32_t> ids,
                                              SignatureContext& context);

// Whether the component of transfers `ids` has the signature `kept`, compared in full: written a
// transfer at a time, each part checked against `kept` as it comes and the writing stopped at the
// first difference, so a component like another costs no second signature in memory.
bool has_signature(const Plan& plan, std::span<const std::int32_t> ids, SignatureContext& context,
                   std::span<const std::int64_t> kept);

}  // namespace refit::sim
