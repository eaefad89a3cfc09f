#include "refit/delta/payload_estimate.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "refit/core/quantization.h"
#include "refit/core/try.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

constexpr std::int64_t kSampleBytes = std::int64_t{2} << 20;
// The quantized sample: a [2048, 2048] weight over 8 steps. A block of fp8-block128 whose amax a
// step changes rescales all its values, and the weight has 256 such blocks: one step would leave
// the payload to a handful of blocks (steps of 1 % change about 4), 8 steps to about 30.
const Shape kWeightShape{2048, 2048};
constexpr std::int64_t kQuantizedSteps = 8;

using Chunk = std::vector<std::byte>;
using Sample = DeltaPayloadEstimate::Sample;

// What `after` sends against `before` (elements of `dtype`).
[[nodiscard]] Result<Sample> encoded(const Chunk& before, const Chunk& after, DType dtype,
                                     const DeltaEncodeOptions& options) {
  const auto size = static_cast<std::int64_t>(before.size());
  Chunk out(static_cast<std::size_t>(delta_payload_capacity(size, dtype_size(dtype))));
  DeltaCodec codec(options);
  const auto header = REFIT_TRY(codec.encode(DeltaSource{.baseline = before,
                                                         .current = after,
                                                         .dtype = dtype,
                                                         .base = checksum_of(before),
                                                         .name = "sample"},
                                             out));
  return Sample{.body_ratio = static_cast<double>(header.body_bytes) / static_cast<double>(size),
                .changed_share = static_cast<double>(header.changed_elements) /
                                 static_cast<double>(size / dtype_size(dtype))};
}

[[nodiscard]] Result<Sample> plain_sample(DType dtype, const SyntheticUpdate& update,
                                          const DeltaEncodeOptions& options) {
  Chunk before(static_cast<std::size_t>(kSampleBytes));
  REFIT_TRY(fill_synthetic_weights(before, dtype, 0, update.seed));
  auto after = before;
  REFIT_TRY(apply_synthetic_step(after, dtype, 0, update, 1));
  auto out = REFIT_TRY(encoded(before, after, dtype, options));
  // Every element the update picks changes its bits: the share is the update's, not the sample's.
  out.changed_share = update.change_fraction;
  return out;
}

// The quantizer's fp8 values and scales of the bf16 weight `bf16` of kWeightShape.
std::pair<Chunk, Chunk> quantized(QuantScheme scheme, const Chunk& bf16) {
  Chunk values(bf16.size() / 2);
  Chunk scales(static_cast<std::size_t>(scale_buffer_bytes(scheme, kWeightShape)));
  quantize(scheme,
           Bf16View{.data = reinterpret_cast<const std::uint16_t*>(bf16.data()),
                    .shape = kWeightShape,
                    .strides = row_major_strides(kWeightShape)},
           std::span(reinterpret_cast<std::uint8_t*>(values.data()), values.size()), scales);
  return {std::move(values), std::move(scales)};
}

// What each step sends of the quantizer's values and scales of the sample weight, step after step,
// averaged over the steps (each step's chunks are the same size): {values, scales}.
[[nodiscard]] Result<std::pair<Sample, Sample>> quantized_sample(QuantScheme scheme,
                                                                 const SyntheticUpdate& update,
                                                                 const DeltaEncodeOptions& options) {
  Chunk bf16(static_cast<std::size_t>(element_count(kWeightShape) * 2));
  REFIT_TRY(fill_synthetic_weights(bf16, DType::kBF16, 0, update.seed));
  std::pair<Sample, Sample> out;
  auto before = quantized(scheme, bf16);
  for (std::int64_t step = 1; step <= kQuantizedSteps; ++step) {
    REFIT_TRY(apply_synthetic_step(bf16, DType::kBF16, 0, update, step));
    auto after = quantized(scheme, bf16);
    const auto values = REFIT_TRY(encoded(before.first, after.first, quant_value_dtype(scheme), options));
    const auto scales = REFIT_TRY(encoded(before.second, after.second, quant_scale_dtype(scheme), options));
    for (auto [sum, one] : {std::pair{&out.first, values}, std::pair{&out.second, scales}}) {
      sum->body_ratio += one.body_ratio / kQuantizedSteps;
      sum->changed_share += one.changed_share / kQuantizedSteps;
    }
    before = std::move(after);
  }
  return out;
}

}  // namespace

Result<DeltaPayloadEstimate> DeltaPayloadEstimate::measure(const SyntheticUpdate& update,
                                                           std::span<const QuantScheme> schemes,
                                                           const DeltaEncodeOptions& options) {
  DeltaPayloadEstimate out;
  out.bf16_ = REFIT_TRY(plain_sample(DType::kBF16, update, options));
  out.fp32_ = REFIT_TRY(plain_sample(DType::kFP32, update, options));
  for (const auto scheme : schemes) {
    const auto [values, scales] = REFIT_TRY(quantized_sample(scheme, update, options));
    out.quantized_.push_back(Quantized{.scheme = scheme, .values = values, .scales = scales});
  }
  return out;
}

Result<DeltaPayloadEstimate::Sample> DeltaPayloadEstimate::sample(const TensorSpec& tensor) const {
  const auto& q = tensor.quantization;
  // fp8 moves for a weight quantized at the senders, at its landing ranks (not its bf16 landing
  // copy) or trained in fp8; bf16 for one quantized at the receivers.
  if (q && q->site != QuantSite::kReceiver && !q->is_landing_copy()) {
    const auto it = std::ranges::find(quantized_, q->scheme, &Quantized::scheme);
    if (it != quantized_.end()) return q->is_scales() ? it->scales : it->values;
  } else if (tensor.dtype == DType::kBF16 || tensor.dtype == DType::kFP32) {
    return tensor.dtype == DType::kFP32 ? fp32_ : bf16_;
  }
  return unsupported(fmt::format(
      "tensor '{}': a delta refit is predicted for bf16 and fp32 weights (the "
      "synthetic update's) and the fp8 of the schemes measured, not {}{}",
      tensor.name, q ? fmt::format("{} ", quant_scheme_name(q->scheme)) : "", dtype_name(tensor.dtype)));
}

Result<double> DeltaPayloadEstimate::expected_bytes(std::int64_t bytes, const TensorSpec& tensor) const {
  const auto s = REFIT_TRY(sample(tensor));
  // Each of the piece's n elements changes with probability p: some does with 1 - (1 - p)^n.
  const double elements = static_cast<double>(bytes / dtype_size(tensor.dtype));
  const double some_change = -std::expm1(elements * std::log1p(-std::min(s.changed_share, 1.0 - 1e-16)));
  const double payload = static_cast<double>(kDeltaHeaderBytes) + s.body_ratio * static_cast<double>(bytes);
  return s.changed_share >= 1.0 ? payload : some_change * payload;
}

}  // namespace refit
