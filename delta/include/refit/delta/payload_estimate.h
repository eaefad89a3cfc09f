#pragma once
// What a piece of a delta refit sends after one step of the synthetic update (synthetic_update.h),
// for predictions: measured, not derived, by encoding a sample chunk of each element type with the
// codec itself (zstd's share depends on the bits a step changes, which no formula of the formats
// gives), then scaled to the piece's size, plus its header, and weighted by the chance that some
// element of the piece changed (a piece with no change sends nothing).
//
// FP8 in flight (quantized at the senders or at the landing ranks, or trained in fp8 as an fp8
// trainer does it: a bf16 master updated, then quantized): the sample is a bf16 weight before and
// after the step, quantized by the library's quantizer, and its fp8 values and its scales are
// encoded as the delta executor encodes them, each a piece of its own. Which share of them a step
// changes is measured too: few fp8 values change (a small step mostly rounds to the same fp8), and
// a block's scale changes with its amax.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/quant_scheme.h"
#include "refit/core/tensor_spec.h"
#include "refit/delta/codec.h"
#include "refit/delta/synthetic_update.h"

namespace refit {

class DeltaPayloadEstimate {
 public:
  // What a step does to one kind of element: the sample's body bytes per dense byte (its payload
  // without the header) and the share of its elements whose bits changed.
  struct Sample {
    double body_ratio = 0;
    double changed_share = 0;
  };

  // Encodes a 2 MiB sample of bf16 and of fp32 weights before and after one step of `update`, and
  // for each of `schemes` the fp8 values and scales of a [2048, 2048] bf16 weight (8 MiB) at each
  // of 8 steps against the step before (averaged: a step rescales few blocks of fp8-block128).
  [[nodiscard]] static Result<DeltaPayloadEstimate> measure(const SyntheticUpdate& update,
                                                            std::span<const QuantScheme> schemes = {},
                                                            const DeltaEncodeOptions& options = {});

  // What a step does to the elements of `tensor` as a plan moves them: bf16 or fp32, or the fp8
  // values or scales of a weight quantized on its way or trained in fp8 (of a scheme measured).
  // Anything else is refused, naming the tensor and its dtype: the synthetic update has no other.
  [[nodiscard]] Result<Sample> sample(const TensorSpec& tensor) const;
  // The expected payload bytes of a piece of `bytes` bytes of `tensor`.
  [[nodiscard]] Result<double> expected_bytes(std::int64_t bytes, const TensorSpec& tensor) const;

 private:
  struct Quantized {
    QuantScheme scheme;
    Sample values;
    Sample scales;
  };
  Sample bf16_;
  Sample fp32_;
  std::vector<Quantized> quantized_;
};

}  // namespace refit
