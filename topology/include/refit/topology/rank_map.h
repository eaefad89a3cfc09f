#pragma once
// The job on the hardware: which GPU of a cluster runs each global rank of a refit (training
// ranks first, then inference ranks). A Cluster describes hardware only; a RankMap is the job's
// placement on it, checked against both the cluster (every GPU exists) and the problem (the rank
// counts match). The same job goes on other hardware by placing it again.
#include <cstdint>
#include <optional>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/units.h"
#include "refit/topology/cluster.h"

namespace refit {

// Where the job's ranks go: training ranks then inference ranks.
struct RankPlacementOptions {
  std::int32_t source_ranks = 0;
  std::int32_t destination_ranks = 0;
  // First GPU of the inference side; default: right after the training GPUs.
  std::optional<std::int32_t> destination_offset;
  // Explicit GPU per global rank; overrides both of the above when not empty.
  std::vector<GpuId> explicit_gpus;
};

// Rank counts and the offset at most limits::kMaxRanks each (so that sums of them stay in int32),
// explicit GPUs as many as the ranks; errors say which count.
[[nodiscard]] Result<void> check_placement_counts(const RankPlacementOptions& options);

// The number of GPUs a placement needs (its highest GPU index + 1; 0 when it places no rank), so
// that a cluster can be sized to a job before the job is placed on it.
// Precondition: check_placement_counts(options).
std::int32_t required_gpus(const RankPlacementOptions& options);

class RankMap {
 public:
  RankMap() = default;  // no ranks
  // Refuses source_ranks outside [0, ranks] and a GPU the cluster does not have, naming it.
  [[nodiscard]] static Result<RankMap> make(const Cluster& cluster, std::vector<GpuId> rank_to_gpu,
                                            std::int32_t source_ranks);
  // Training ranks on the first GPUs in order, inference ranks right after them (or from the
  // destination offset), or the explicit GPUs; refuses a cluster too small for them.
  [[nodiscard]] static Result<RankMap> place(const Cluster& cluster, const RankPlacementOptions& options);

  // Refuses a problem with other rank counts (kMismatch, naming both).
  [[nodiscard]] Result<void> check(const ReshardProblem& problem) const;

  std::int32_t rank_count() const { return static_cast<std::int32_t>(rank_to_gpu_.size()); }
  std::int32_t source_ranks() const { return source_ranks_; }
  bool has_rank(Rank r) const { return r.value >= 0 && r.value < rank_count(); }
  // Preconditions: has_rank(r).
  GpuId gpu_of(Rank r) const { return rank_to_gpu_[static_cast<std::size_t>(r.value)]; }
  const std::vector<GpuId>& gpus() const { return rank_to_gpu_; }
  bool operator==(const RankMap&) const = default;

 private:
  RankMap(std::vector<GpuId> rank_to_gpu, std::int32_t source_ranks)
      : rank_to_gpu_(std::move(rank_to_gpu)), source_ranks_(source_ranks) {}
  std::vector<GpuId> rank_to_gpu_;
  std::int32_t source_ranks_ = 0;
};

// A cluster with a job placed on it: the pair that planning, plan statistics, the lower bound and
// the simulator take, checked once so that they can look ranks up without checking again.
class PlacedCluster {
 public:
  // Refuses a rank map with a GPU the cluster does not have (one made for another cluster).
  [[nodiscard]] static Result<PlacedCluster> make(Cluster cluster, RankMap ranks);

  const Cluster& cluster() const { return cluster_; }
  const RankMap& ranks() const { return ranks_; }
  const std::string& name() const { return cluster_.name(); }

  // Preconditions: ranks().has_rank(r).
  GpuId gpu_of(Rank r) const { return ranks_.gpu_of(r); }
  std::int32_t domain_of(Rank r) const { return cluster_.domain_of(gpu_of(r)); }
  std::optional<std::int32_t> nic_of(Rank r) const { return cluster_.nic_of(gpu_of(r)); }

 private:
  PlacedCluster(Cluster cluster, RankMap ranks) : cluster_(std::move(cluster)), ranks_(std::move(ranks)) {}
  Cluster cluster_;
  RankMap ranks_;
};

}  // namespace refit
