#pragma once
// The small FP8-in-flight problem the executors' tests share: training ranks hold bf16 weights,
// the plan moves their fp8 values and scales (quantized at the senders).
#include <algorithm>
#include <vector>

#include "refit/core/quantized_problem.h"
#include "refit/executors/executor.h"
#include "refit/lowering/rank_program.h"
#include "test_problems.h"

namespace refit::testing {

// A [256, 512] weight with rows split over training ranks 0-1 (whole 128-row blocks), columns
// over inference ranks 2-5 twice (2 replicas: ranks 2 and 4 hold columns 0..255); stacked experts
// [4, 160, 96] split by expert on both sides (ragged 128x128 blocks at their edges: 160 = 128 + 32
// rows, 96 columns); a norm that stays bf16. Five tensors: the two weights with their scales, and
// the norm. `site`: where the weights are quantized (the default: at the senders, which hold whole
// blocks; kTraining: trained in fp8, the training ranks hold the values and scales).
inline ReshardProblem quantized_test_problem(QuantScheme scheme, QuantSite site = QuantSite::kLanding) {
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
  return quantize_problem(p, {.scheme = scheme, .site = site}, [](const TensorSpec&) { return true; })
      .value();
}

// Training rank 0's buffers of quantized_test_problem, as a framework holds them: w.weight (rows
// 0..127, [128, 512]) in the right half of a [128, 1024] bf16 parameter, a strided region as in
// Megatron's fused parameters; every other box in a parameter of its own. `storage` keeps the
// parameters' bytes (one per source, in order) while the buffers are used.
inline void hold_as_parameters(const ReshardProblem& problem, RankBuffers& b,
                               std::vector<std::vector<std::byte>>& storage) {
  storage.resize(b.sources.size());
  for (std::size_t i = 0; i < b.sources.size(); ++i) {
    auto& s = b.sources[i];
    auto& p = storage[i];
    lowering::Region region{.box = s.box, .buffer = static_cast<std::int32_t>(i), .offset = 0, .strides = {}};
    if (problem.tensors()[s.tensor].tensor.name == "w.weight") {
      p.assign(128 * 1024 * 2, std::byte{0});
      for (std::size_t row = 0; row < 128; ++row)
        std::copy_n(s.bytes.begin() + static_cast<std::ptrdiff_t>(row * 1024), 1024,
                    p.begin() + static_cast<std::ptrdiff_t>((row * 1024 + 512) * 2));
      region.offset = 512 * 2;
      region.strides = {1024, 1};
    } else {
      p.assign(s.bytes.begin(), s.bytes.end());
      region.strides = row_major_strides(s.box.extent);
    }
    b.source_parameters.push_back(p);
    s.bytes = {};
    s.regions = {region};
  }
}

}  // namespace refit::testing
