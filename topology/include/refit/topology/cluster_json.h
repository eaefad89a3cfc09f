#pragma once
// The cluster file format (documented in the README): one JSON object with "name",
// "nvlink_latency_us", "fabric", "gpus", "domains", "nics" and "placement". Bandwidths are
// effective GB/s per direction (fields ending in _gbps or "gbps"), latencies microseconds.
// Dumping a cluster and loading it back gives an equal Cluster.
#include <filesystem>
#include <string_view>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"
#include "refit/topology/cluster.h"

namespace refit {

nlohmann::ordered_json cluster_to_json(const Cluster& cluster);

// Validates the structure (errors name the JSON path: "gpus[3].node: missing") and then the
// cluster itself (Cluster::make). Unknown fields are refused, so that typos do not pass.
[[nodiscard]] Result<Cluster> cluster_from_json(const nlohmann::json& json);
[[nodiscard]] Result<Cluster> parse_cluster_json(std::string_view text);

// Reads a cluster file. When `placement` asks for ranks, it replaces the file's placement.
[[nodiscard]] Result<Cluster> load_cluster_file(const std::filesystem::path& path,
                                                const RankPlacementOptions& placement);

}  // namespace refit
