#pragma once
// A rank's buffers as Python hands them in: any arrays that export DLPack (numpy arrays, torch
// tensors on the CPU or on a CUDA device), keyed by tensor name. Each is checked against the
// rank's box of its tensor (shape equal to the box's extent, the tensor's dtype, row-major and
// contiguous, its bytes, writable where the rank receives) before anything else happens, and the
// error names the buffer.
#include <string>
#include <vector>

#include <nanobind/ndarray.h>

#include "bindings.h"

namespace refit::python {

struct RankArrays {
  RankBuffers buffers;
  // Held for as long as the executor may touch their memory (the prepared plan's life).
  std::vector<nb::ndarray<nb::ro>> sources;
  std::vector<nb::ndarray<>> destinations;
};

// The rank's buffers from `arrays` (tensor name -> array), checked against the plan's problem.
// Needs the GIL.
[[nodiscard]] Result<RankArrays> rank_arrays(const ReshardProblem& problem, Rank rank,
                                             const nb::dict& arrays);

}  // namespace refit::python
