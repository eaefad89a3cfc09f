#pragma once
// A storage map (storage_map.h) as JSON, for manifests of version 2 and `refit models --storage`:
//
// {"framework": "megatron", "ranks": [
//   {"rank": 0,
//    "parameters": [{"name": "decoder.layers.0.self_attention.linear_qkv.weight",
//                    "shape": [128, 64], "dtype": "bf16"}],
//    "regions": [{"tensor": "model.layers.0.self_attn.q_proj.weight",
//                 "box": {"offset": [0, 0], "extent": [32, 64]},
//                 "parameter": 0, "offset": 0, "strides": [64, 1]}]}]}
//
// Regions name their tensor; "offset" and "strides" count elements of the parameter. Every rank
// of the side appears once, in order.
#include <string>

#include <nlohmann/json.hpp>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/models/storage_map.h"

namespace refit::models {

nlohmann::ordered_json storage_json(const StorageMap& map, const ReshardProblem& problem);
// One rank's entry of storage_json's "ranks": what a writer streams rank by rank.
nlohmann::ordered_json rank_storage_json(const StorageMap& map, std::size_t index,
                                         const ReshardProblem& problem);

// The map of one side (`source`: the training ranks) of `problem`. Errors carry the JSON path
// under `path`: a tensor the problem does not have, a box outside it, a parameter index out of
// range, a region reaching past its parameter, a rank missing or out of order.
[[nodiscard]] Result<StorageMap> parse_storage(const nlohmann::json& j, const std::string& path,
                                               const ReshardProblem& problem, bool source);

}  // namespace refit::models
