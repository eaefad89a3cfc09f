#pragma once
// The cluster file format (documented in the README): one JSON object with "name",
// "nvlink_latency_us", "fabric", "gpus", "domains", "nics", and optionally "placement" (a job's
// rank map, read apart from the hardware). Bandwidths are effective GB/s per direction (fields
// ending in _gbps or "gbps"), latencies microseconds. Dumping a cluster and loading it back gives
// an equal Cluster (and RankMap).
#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"
#include "refit/topology/cluster.h"
#include "refit/topology/rank_map.h"

namespace refit {

// The hardware, and a job's ranks on it when `ranks` is given and has any.
nlohmann::ordered_json cluster_to_json(const Cluster& cluster, const RankMap* ranks = nullptr);

struct ClusterFile {
  Cluster cluster;
  std::optional<RankMap> ranks;  // the file's "placement", when it has one with ranks
};

// Validates the structure (errors name the JSON path: "gpus[3].node: missing") and then the
// cluster itself (Cluster::make) and the placement against it. Unknown fields are refused, so
// that typos do not pass.
[[nodiscard]] Result<ClusterFile> cluster_from_json(const nlohmann::json& json);
[[nodiscard]] Result<ClusterFile> parse_cluster_json(std::string_view text);
[[nodiscard]] Result<ClusterFile> load_cluster_file(const std::filesystem::path& path);

}  // namespace refit
