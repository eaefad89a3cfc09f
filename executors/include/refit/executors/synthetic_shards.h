#pragma once
// Synthetic weights for a delta refit between processes (`refit run --delta`, the tests, the
// benchmarks): every rank's source shards hold the weights of delta/synthetic_update.h and take
// step after step of its seeded RL-like update, while each inference rank keeps what its
// destination shards must hold after every step (computed on its own, since any rank can compute
// any element at any step) and checks them byte for byte.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/delta/synthetic_update.h"
#include "refit/executors/executor.h"

namespace refit {

class SyntheticShards {
 public:
  // Fills `buffers.sources` (contiguous host shards of `problem`'s tensors, bf16 or fp32) with
  // the initial weights and keeps a copy of what `buffers.destinations` must hold; the buffers must
  // outlive this object. Tensor t's weights follow seed `update.seed` mixed with t. Errors name the
  // tensor whose dtype the update does not take, or a shard held as framework regions.
  [[nodiscard]] static Result<SyntheticShards> make(const ReshardProblem& problem, const RankBuffers& buffers,
                                                    const SyntheticUpdate& update);

  // Applies the next step of the update to the sources and to the expected destinations.
  [[nodiscard]] Result<void> advance();
  std::int64_t step() const { return step_; }  // steps applied so far (0: the initial weights)

  // Every destination byte against what it must hold after step(); the error names the tensor, the
  // box and the first wrong element (row-major in the box).
  [[nodiscard]] Result<void> verify() const;

 private:
  struct Shard {
    std::uint32_t tensor = 0;
    DType dtype = DType::kBF16;
    Shape tensor_shape;
    std::string name;
    ShardBuffer buffer;
    std::vector<std::byte> expected;  // destinations: what the buffer must hold
  };
  SyntheticShards() = default;
  [[nodiscard]] Result<void> step_box(const Shard& shard, std::span<std::byte> bytes) const;

  SyntheticUpdate update_;
  std::int64_t step_ = 0;
  std::vector<Shard> sources_;
  std::vector<Shard> destinations_;
};

}  // namespace refit
