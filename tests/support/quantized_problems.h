#pragma once
// The small FP8-in-flight problem the executors' tests share: training ranks hold bf16 weights,
// the plan moves their fp8 values and scales (quantised at the senders).
#include "refit/core/quantized_problem.h"
#include "test_problems.h"

namespace refit::testing {

// A [256, 512] weight with rows split over training ranks 0-1 (whole 128-row blocks), columns
// over inference ranks 2-5 twice (2 replicas: ranks 2 and 4 hold columns 0..255); stacked experts
// [4, 160, 96] split by expert on both sides (ragged 128x128 blocks at their edges: 160 = 128 + 32
// rows, 96 columns); a norm that stays bf16. Five tensors: the two weights with their scales, and
// the norm.
inline ReshardProblem quantized_test_problem(QuantScheme scheme) {
  const Shape w{256, 512}, e{4, 160, 96}, n{512};
  const auto p =
      ReshardProblem::make({make_reshard("w.weight", w, make_layout(w, {2}, rank_range(0, 2), "S0"),
                                         make_layout(w, {2, 2}, rank_range(2, 4), "R,S1")),
                            make_reshard("experts", e, make_layout(e, {2}, rank_range(0, 2), "S0"),
                                         make_layout(e, {2, 2}, rank_range(2, 4), "S0,R")),
                            make_reshard("norm.weight", n, make_layout(n, {2}, rank_range(0, 2), "R"),
                                         make_layout(n, {4}, rank_range(2, 4), "R"))},
                           2, 4)
          .value();
  return quantize_problem(p, {.scheme = scheme}, [](const TensorSpec&) { return true; }).value();
}

}  // namespace refit::testing
