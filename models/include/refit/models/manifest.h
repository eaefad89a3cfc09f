#pragma once
// The manifest: a ReshardProblem as JSON, so any framework can describe its tensors and layouts.
//
// {"format": "refit-manifest", "version": 1, "source_ranks": 2, "destination_ranks": 2,
//  "tensors": [{"name": "w", "shape": [8, 4], "dtype": "bf16",
//               "source": {"mesh": [2], "ranks": [0, 1], "placements": ["S0"]},
//               "destination": {"mesh": [2], "ranks": [2, 3], "placements": ["S1"]}}]}
//
// "ranks" may be left out: the source side then defaults to 0..n-1 and the destination side to
// source_ranks..source_ranks+n-1. Placements are "R" or "S<dim>", one per mesh axis.
#include <filesystem>
#include <string>
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/problem.h"

namespace refit::models {

// Errors carry the JSON path of the offending value, e.g. "tensors[3].source.placements[1]".
[[nodiscard]] Result<ReshardProblem> parse_manifest(std::string_view json_text);
[[nodiscard]] Result<ReshardProblem> load_manifest(const std::filesystem::path& path);

std::string write_manifest(const ReshardProblem& problem);  // compact JSON text
[[nodiscard]] Result<void> save_manifest(const ReshardProblem& problem, const std::filesystem::path& path);

}  // namespace refit::models
