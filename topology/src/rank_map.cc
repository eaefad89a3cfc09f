#include "refit/topology/rank_map.h"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit {

Result<void> check_placement_counts(const RankPlacementOptions& o) {
  if (o.source_ranks < 0 || o.destination_ranks < 0) return out_of_range("rank counts must be >= 0");
  const auto offset = o.destination_offset.value_or(0);
  if (offset < 0) return out_of_range("placement: destination offset is negative");
  for (const auto& [count, what] :
       {std::pair{o.source_ranks, "training ranks"}, std::pair{o.destination_ranks, "inference ranks"},
        std::pair{offset, "as the inference ranks' first GPU"}})
    if (count > limits::kMaxRanks)
      return out_of_range(fmt::format("placement: {} {}, at most {}", count, what, limits::kMaxRanks));
  const std::int64_t reach =
      std::max<std::int64_t>(o.source_ranks, std::int64_t{o.destination_offset.value_or(o.source_ranks)} +
                                                 (o.destination_ranks > 0 ? o.destination_ranks : 0));
  if (o.explicit_gpus.empty() && reach > limits::kMaxRanks)
    return out_of_range(
        fmt::format("placement: {} training ranks and {} inference ranks from GPU {} need {} "
                    "GPUs, more than the {} a cluster may have",
                    o.source_ranks, o.destination_ranks, o.destination_offset.value_or(o.source_ranks), reach,
                    limits::kMaxRanks));
  if (!o.explicit_gpus.empty() &&
      static_cast<std::int64_t>(o.explicit_gpus.size()) != std::int64_t{o.source_ranks} + o.destination_ranks)
    return mismatch(fmt::format("placement: {} GPUs listed for {} ranks", o.explicit_gpus.size(),
                                std::int64_t{o.source_ranks} + o.destination_ranks));
  return {};
}

std::int32_t required_gpus(const RankPlacementOptions& o) {
  std::int32_t needed = 0;
  if (!o.explicit_gpus.empty()) {
    for (const auto g : o.explicit_gpus) needed = std::max(needed, g.value + 1);
    return needed;
  }
  needed = o.source_ranks;
  if (o.destination_ranks > 0)
    needed = std::max(needed, o.destination_offset.value_or(o.source_ranks) + o.destination_ranks);
  return needed;
}

Result<RankMap> RankMap::make(const Cluster& cluster, std::vector<GpuId> rank_to_gpu,
                              std::int32_t source_ranks) {
  if (source_ranks < 0 || source_ranks > static_cast<std::int32_t>(rank_to_gpu.size()))
    return out_of_range(fmt::format("source_ranks {} is outside [0, {}]", source_ranks, rank_to_gpu.size()));
  const auto gpus = static_cast<std::int32_t>(cluster.gpus().size());
  for (std::size_t r = 0; r < rank_to_gpu.size(); ++r)
    if (rank_to_gpu[r].value < 0 || rank_to_gpu[r].value >= gpus)
      return not_found(fmt::format("rank_to_gpu[{}]: GPU {} does not exist (cluster '{}' has {} GPUs)", r,
                                   rank_to_gpu[r].value, cluster.name(), gpus));
  return RankMap(std::move(rank_to_gpu), source_ranks);
}

Result<RankMap> RankMap::place(const Cluster& cluster, const RankPlacementOptions& o) {
  const auto gpus = static_cast<std::int32_t>(cluster.gpus().size());
  REFIT_TRY(check_placement_counts(o));
  if (!o.explicit_gpus.empty()) return make(cluster, o.explicit_gpus, o.source_ranks);
  const std::int32_t offset = o.destination_offset.value_or(o.source_ranks);
  if (o.source_ranks > gpus || offset + o.destination_ranks > gpus)
    return mismatch(fmt::format(
        "cluster '{}' has {} GPUs, too few for {} training ranks and {} inference ranks at GPU offset {}",
        cluster.name(), gpus, o.source_ranks, o.destination_ranks, offset));
  std::vector<GpuId> placement;
  for (std::int32_t r = 0; r < o.source_ranks; ++r) placement.emplace_back(r);
  for (std::int32_t r = 0; r < o.destination_ranks; ++r) placement.emplace_back(offset + r);
  return make(cluster, std::move(placement), o.source_ranks);
}

Result<void> RankMap::check(const ReshardProblem& p) const {
  if (rank_count() != p.world_size() || source_ranks() != p.source_ranks())
    return mismatch(fmt::format(
        "the placement has {} ranks ({} training), the problem has {} ({} training, {} inference)",
        rank_count(), source_ranks(), p.world_size(), p.source_ranks(), p.destination_ranks()));
  return {};
}

Result<PlacedCluster> PlacedCluster::make(Cluster cluster, RankMap ranks) {
  REFIT_TRY(RankMap::make(cluster, ranks.gpus(), ranks.source_ranks()));
  return PlacedCluster(std::move(cluster), std::move(ranks));
}

}  // namespace refit
