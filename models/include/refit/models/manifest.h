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
//
// Version 2 adds how each side's framework stores the tensors (storage_json.h):
//   "storage": {"source": {"framework": "megatron", "ranks": [...]},
//               "destination": {"framework": "vllm", "ranks": [...]}}
// Version 1 manifests (no storage) still load.
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/models/storage_map.h"

namespace refit::models {

// Both sides' storage maps of one problem.
struct StorageMaps {
  StorageMap source;       // the training ranks
  StorageMap destination;  // the inference ranks
};

struct Manifest {
  ReshardProblem problem;
  std::optional<StorageMaps> storage;  // version 2 with "storage" only
};

// Errors carry the JSON path of the offending value, e.g. "tensors[3].source.placements[1]".
[[nodiscard]] Result<Manifest> parse_manifest_with_storage(std::string_view json_text);
[[nodiscard]] Result<Manifest> load_manifest_with_storage(const std::filesystem::path& path);
// The problem alone (any version).
[[nodiscard]] Result<ReshardProblem> parse_manifest(std::string_view json_text);
[[nodiscard]] Result<ReshardProblem> load_manifest(const std::filesystem::path& path);

// Compact JSON text: version 1, or version 2 with `storage`.
std::string write_manifest(const ReshardProblem& problem, const StorageMaps* storage = nullptr);
// The same, written to `out` as it goes (save_manifest's way: nothing held whole).
void write_manifest(const ReshardProblem& problem, const StorageMaps* storage, std::ostream& out);
[[nodiscard]] Result<void> save_manifest(const ReshardProblem& problem, const std::filesystem::path& path,
                                         const StorageMaps* storage = nullptr);

}  // namespace refit::models
