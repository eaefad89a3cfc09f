#pragma once
// Which regime of its node's links a refit runs in (CacheSpec, cluster.h): the cluster as the
// planner and the simulator see it for one problem, the node's in-cache figures where the shards
// its ranks hold fit its cache, the streaming ones elsewhere.
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "refit/core/problem.h"
#include "refit/topology/rank_map.h"

namespace refit {

// The bytes of source and destination shards the ranks on each node hold: each rank's box of
// each tensor, at the dtype its buffer holds (held_dtype).
std::map<std::int32_t, Bytes> shard_bytes_by_node(const ReshardProblem& problem,
                                                  const PlacedCluster& cluster);

// `spec` with every node whose cache holds `held_by_node[node]` (absent: 0 bytes) running its NICs
// and its GPUs' copies at the cache's figures; the nodes without a cache, or whose shards
// overflow it, keep the streaming figures.
ClusterSpec in_cache_regime(ClusterSpec spec, const std::map<std::int32_t, Bytes>& held_by_node);

// A cluster placed for one problem, and a line per cached node that holds some of its shards
// saying which regime the node runs in.
struct CacheRegime {
  PlacedCluster cluster;
  std::vector<std::string> notes;
};

// `cluster` as a refit of `problem` runs on it; nothing when it has no cache (it is as it runs).
[[nodiscard]] Result<std::optional<CacheRegime>> cache_regime(const ReshardProblem& problem,
                                                              const PlacedCluster& cluster);

}  // namespace refit
