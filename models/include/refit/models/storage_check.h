#pragma once
// Storage maps checked as plans are (validate()): a map that would drop received bytes, write one
// element over another or read past a parameter is refused naming the rank, the parameter and the
// region, before any memory is touched. The rules (models/storage_map.h) make maps that pass; a
// version 2 manifest, or a map re-indexed for quantization, may not.
//
// For each rank of the side:
// - parameters: names unique and not empty; shapes of at most 2^48 elements and 2^56 bytes,
//   computed without overflow;
// - regions: a tensor of the problem, a box inside the rank's box of that tensor on this side, a
//   parameter of the rank in the dtype the side holds of the tensor, and offset and strides that
//   keep every element inside the parameter (no negative or zero stride along a dim of several
//   elements, no overflow);
// - coverage: the regions of each tensor tile the rank's box of it exactly (every element in one
//   region), and a tensor the rank holds nothing of has no region;
// - memory: no two elements of the rank's regions in one place of a parameter (regions do not
//   overlap each other, nor themselves).
#include <cstddef>
#include <string>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/models/storage_map.h"

namespace refit::models {

// Checks the rank at `index` of `map` (the side `source` says) against `problem`. Errors are
// kMismatch (kOutOfRange for sizes) and start with `where` and the rank's position in the map,
// e.g. "storage.destination.ranks[3].regions[7]".
[[nodiscard]] Result<void> check_rank_storage(const StorageMap& map, std::size_t index,
                                              const ReshardProblem& problem, bool source,
                                              const std::string& where);

// Every rank of `map`.
[[nodiscard]] Result<void> check_storage(const StorageMap& map, const ReshardProblem& problem, bool source,
                                         const std::string& where);

}  // namespace refit::models
