#pragma once
// Synthetic weights for a delta refit between processes (`refit run --delta`, the tests, the
// benchmarks): every rank's source shards hold the weights of delta/synthetic_update.h and take
// step after step of its seeded RL-like update, while each inference rank keeps what its
// destination shards must hold after every step (computed on its own, since any rank can compute
// any element at any step) and checks them byte for byte. A weight quantized on its way (FP8 in
// flight, at the senders or at its landing ranks) takes the update in bf16 at the training ranks,
// and an inference rank must hold what the CPU quantizer makes of its box of that step's bf16: what
// a dense FP8 refit delivers. A weight trained in fp8 takes the update in a bf16 master at each
// training rank, which quantizes its box of it into the fp8 values and scales it holds, as an fp8
// trainer does; every inference rank must hold the same quantizer's bytes of its box.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/quant_scheme.h"
#include "refit/delta/synthetic_update.h"
#include "refit/executors/executor.h"

namespace refit {

class SyntheticShards {
 public:
  // Fills `buffers.sources` (contiguous host shards of `problem`'s tensors, bf16 or fp32, a
  // weight quantized at the senders, held in bf16, or one trained in fp8, its values and scales) with
  // the initial weights and keeps a copy of what `buffers.destinations` must hold; the buffers must
  // outlive this object. Tensor t's weights follow seed `update.seed` mixed with t. The first
  // round(frozen_fraction * tensors) tensors of the problem never change: frozen bottom layers (the
  // embeddings and the first blocks, in a model's order), the way partial training leaves a model,
  // so that the bytes that move are not spread over the tensors as their dense bytes are. Errors
  // name the tensor whose dtype the update does not take, a shard held as framework regions, a
  // scales box that is not its weight box's, or a frozen fraction outside [0, 1].
  [[nodiscard]] static Result<SyntheticShards> make(const ReshardProblem& problem, const RankBuffers& buffers,
                                                    const SyntheticUpdate& update,
                                                    double frozen_fraction = 0.0);

  // Applies the next step of the update to the sources and to the expected destinations.
  [[nodiscard]] Result<void> advance();
  std::int64_t step() const { return step_; }  // steps applied so far (0: the initial weights)

  // Every destination byte against what it must hold after step(); the error names the tensor, the
  // box and the first wrong element (row-major in the box).
  [[nodiscard]] Result<void> verify() const;

 private:
  struct Shard {
    std::uint32_t tensor = 0;
    std::uint32_t weights_of = 0;  // the tensor whose synthetic weights it holds (its landing copy's
                                   // for fp8 made at landing ranks; else itself)
    DType dtype = DType::kBF16;
    Shape tensor_shape;
    std::string name;
    ShardBuffer buffer;
    std::vector<std::byte> expected;  // destinations: what the buffer must hold
    // Destinations of a weight quantized on its way, and both sides of one trained in fp8: the
    // bf16 master its values and scales are quantized from, and its scales shard (an index into
    // the same side's shards).
    std::vector<std::byte> weights;
    QuantScheme scheme = QuantScheme::kFp8Block128;
    std::size_t scales = 0;
  };
  SyntheticShards() = default;
  [[nodiscard]] Result<void> step_box(const Shard& shard, std::span<std::byte> bytes) const;
  [[nodiscard]] static Result<void> pair_quantized(const ReshardProblem& problem, std::vector<Shard>& shards,
                                                   bool destinations);
  void requantize();

  SyntheticUpdate update_;
  std::uint32_t frozen_tensors_ = 0;  // tensors [0, frozen_tensors_) never change
  std::int64_t step_ = 0;
  std::vector<Shard> sources_;
  std::vector<Shard> destinations_;
};

}  // namespace refit
