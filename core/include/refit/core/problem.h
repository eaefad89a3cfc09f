#pragma once
// A reshard problem: every tensor with its source (training) and destination (inference) layout.
// Global ranks: training ranks are 0..source_ranks-1, inference ranks follow them.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/layout.h"
#include "refit/core/tensor_spec.h"

namespace refit {

struct TensorReshard {
  TensorSpec tensor;
  Layout source;
  Layout destination;
};

class ReshardProblem {
 public:
  // Checks that layouts match the tensor shapes, names are unique, source meshes use ranks in
  // [0, source_ranks) and destination meshes ranks in [source_ranks, source_ranks+destination_ranks).
  [[nodiscard]] static Result<ReshardProblem> make(std::vector<TensorReshard> tensors,
                                                   std::int32_t source_ranks, std::int32_t destination_ranks);

  const std::vector<TensorReshard>& tensors() const { return tensors_; }
  std::int32_t source_ranks() const { return source_ranks_; }
  std::int32_t destination_ranks() const { return destination_ranks_; }
  std::int32_t world_size() const { return source_ranks_ + destination_ranks_; }
  bool is_source(Rank r) const { return r.value < source_ranks_; }
  Bytes total_bytes() const;

 private:
  std::vector<TensorReshard> tensors_;
  std::int32_t source_ranks_ = 0;
  std::int32_t destination_ranks_ = 0;
};

// What every rank of a job must have built alike: each tensor (name, shape, dtype, quantization)
// and its two layouts (meshes, ranks, placements), and the rank counts.
std::uint64_t problem_fingerprint(const ReshardProblem& problem);

}  // namespace refit
