#pragma once
// What a piece of a delta refit sends after one step of the synthetic update (synthetic_update.h),
// for predictions: measured, not derived, by encoding a sample chunk of each element type with the
// codec itself (zstd's share depends on the bits a step changes, which no formula of the formats
// gives), then scaled to the piece's size, plus its header, and weighted by the chance that some
// element of the piece changed (a piece with no change sends nothing).
#include <cstdint>

#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/delta/codec.h"
#include "refit/delta/synthetic_update.h"

namespace refit {

class DeltaPayloadEstimate {
 public:
  // Encodes a 2 MiB sample of bf16 and of fp32 weights before and after one step of `update`.
  [[nodiscard]] static Result<DeltaPayloadEstimate> measure(const SyntheticUpdate& update,
                                                            const DeltaEncodeOptions& options = {});

  // The expected payload bytes of a piece of `bytes` bytes of `dtype` (bf16 or fp32; anything else
  // is refused, naming the dtype: the synthetic update has no other).
  [[nodiscard]] Result<double> expected_bytes(std::int64_t bytes, DType dtype) const;
  // The sample's body bytes per dense byte (its payload without the header).
  double body_ratio(DType dtype) const { return dtype == DType::kFP32 ? fp32_ratio_ : bf16_ratio_; }

 private:
  double change_fraction_ = 0;
  double bf16_ratio_ = 0;
  double fp32_ratio_ = 0;
};

}  // namespace refit
