#pragma once
// The delta refit tests' problem: small tensors of three dtypes whose boxes make every kind of
// piece (tests/executors/delta_executor_test.cc, nccl/delta_step_program_test.cc).
#include "refit/core/problem.h"
#include "test_problems.h"

namespace refit::testing {

// 2 training ranks -> 2 inference ranks: w [64, 96] bf16 split by rows -> by columns (each piece a
// strided box of the destination shard), b [300] fp32 replicated -> split, n [40, 8] bf16
// split by rows on both sides, r [32, 16] bf16 split by rows -> replicated (each training rank
// sends its box to both inference ranks: one baseline, encoded once for both).
inline ReshardProblem delta_problem() {
  std::vector<TensorReshard> tensors;
  tensors.push_back(make_reshard("w", {64, 96}, make_layout({64, 96}, {2}, rank_range(0, 2), "S0"),
                                 make_layout({64, 96}, {2}, rank_range(2, 2), "S1")));
  tensors.push_back(make_reshard("b", {300}, make_layout({300}, {2}, rank_range(0, 2), "R"),
                                 make_layout({300}, {2}, rank_range(2, 2), "S0"), DType::kFP32));
  tensors.push_back(make_reshard("n", {40, 8}, make_layout({40, 8}, {2}, rank_range(0, 2), "S0"),
                                 make_layout({40, 8}, {2}, rank_range(2, 2), "S0")));
  tensors.push_back(make_reshard("r", {32, 16}, make_layout({32, 16}, {2}, rank_range(0, 2), "S0"),
                                 make_layout({32, 16}, {2}, rank_range(2, 2), "R")));
  return ReshardProblem::make(std::move(tensors), 2, 2).value();
}

}  // namespace refit::testing
