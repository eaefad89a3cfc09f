#pragma once
// A rank's buffers as Python hands them in: any arrays that export DLPack (numpy arrays, torch
// tensors on the CPU or on a CUDA device), keyed by tensor name (each the rank's box of the
// tensor) or by framework-parameter name (each a parameter holding regions of the rank's boxes,
// models/storage_map.h). Each is checked (shape equal to the box's extent or the parameter's
// shape, the dtype, row-major and contiguous, its bytes, writable where the rank receives) before
// anything else happens, and the error names the buffer.
#include <cstdint>
#include <string>
#include <vector>

#include <nanobind/ndarray.h>

#include "bindings.h"

namespace refit::python {

// No memory lies in the first page of an address space: an array whose bytes start there has none
// (a null data pointer, plus the offset of a view into it). Bound as FIRST_PAGE_BYTES.
inline constexpr std::uintptr_t kFirstPage = 4096;

struct RankArrays {
  RankBuffers buffers;
  // Held for as long as the executor may touch their memory (the prepared plan's life).
  std::vector<nb::ndarray<nb::ro>> sources;
  std::vector<nb::ndarray<>> destinations;
  // How messages name the rank's first buffer ("buffer 'w' (rank 2)"); "" when it has none.
  std::string named;
};

// The rank's buffers from `arrays` (tensor name -> array), checked against the plan's problem.
// Needs the GIL.
[[nodiscard]] Result<RankArrays> rank_arrays(const ReshardProblem& problem, Rank rank,
                                             const nb::dict& arrays);

// The rank's buffers from `arrays` (parameter name -> array): every parameter `side` gives the rank,
// the shards as regions of them (framework_rank_buffers). Elements in no region are left as they
// are. Needs the GIL.
[[nodiscard]] Result<RankArrays> parameter_arrays(const ReshardProblem& problem,
                                                  const models::StorageMap& side, Rank rank,
                                                  const nb::dict& arrays);

}  // namespace refit::python
