#pragma once
// The small problem of FP8 at the landing ranks the tests share (core/quantization.h).
#include "refit/core/quantized_problem.h"
#include "test_problems.h"

namespace refit::testing {

// A [256, 512] bf16 weight "w" in rows of 200 on training ranks 0 and 1, which cuts block row 1
// (rows 128..255), into `engines` inference engines of `tp` ranks (2, 3, ...; a mesh (R, S1)),
// quantized (fp8-block128) at its landing ranks: one engine gets it in bf16 as "w@landing".
// Tensors: the fp8 values 0, the scales 1, the landing copy 2.
inline ReshardProblem landing_test_problem(std::int64_t engines, std::int64_t tp) {
  const Shape w{256, 512};
  const auto inference = static_cast<std::int32_t>(engines * tp);
  const auto bf16 =
      ReshardProblem::make({make_reshard("w", w, make_layout(w, {2}, rank_range(0, 2), "S0:200"),
                                         make_layout(w, {engines, tp}, rank_range(2, inference), "R,S1"))},
                           2, inference)
          .value();
  return quantize_problem(bf16, {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kLanding},
                          [](const TensorSpec&) { return true; })
      .value();
}

}  // namespace refit::testing
