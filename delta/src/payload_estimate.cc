#include "refit/delta/payload_estimate.h"

#include <cmath>
#include <vector>

#include <fmt/format.h>

namespace refit {
namespace {

constexpr std::int64_t kSampleBytes = std::int64_t{2} << 20;

// The sample's body bytes per dense byte after one step.
[[nodiscard]] Result<double> sample_ratio(DType dtype, const SyntheticUpdate& update,
                                          const DeltaEncodeOptions& options) {
  std::vector<std::byte> before(static_cast<std::size_t>(kSampleBytes));
  if (auto ok = fill_synthetic_weights(before, dtype, 0, update.seed); !ok)
    return std::unexpected(ok.error());
  auto after = before;
  if (auto ok = apply_synthetic_step(after, dtype, 0, update, 1); !ok) return std::unexpected(ok.error());
  std::vector<std::byte> out(
      static_cast<std::size_t>(delta_payload_capacity(kSampleBytes, dtype_size(dtype))));
  DeltaCodec codec(options);
  const auto header = codec.encode(DeltaSource{.baseline = before,
                                               .current = after,
                                               .dtype = dtype,
                                               .base = checksum_of(before),
                                               .name = "sample"},
                                   out);
  if (!header) return std::unexpected(header.error());
  return static_cast<double>(header->body_bytes) / static_cast<double>(kSampleBytes);
}

}  // namespace

Result<DeltaPayloadEstimate> DeltaPayloadEstimate::measure(const SyntheticUpdate& update,
                                                           const DeltaEncodeOptions& options) {
  DeltaPayloadEstimate out;
  out.change_fraction_ = update.change_fraction;
  const auto bf16 = sample_ratio(DType::kBF16, update, options);
  if (!bf16) return std::unexpected(bf16.error());
  const auto fp32 = sample_ratio(DType::kFP32, update, options);
  if (!fp32) return std::unexpected(fp32.error());
  out.bf16_ratio_ = *bf16;
  out.fp32_ratio_ = *fp32;
  return out;
}

Result<double> DeltaPayloadEstimate::expected_bytes(std::int64_t bytes, DType dtype) const {
  if (dtype != DType::kBF16 && dtype != DType::kFP32)
    return unsupported(
        fmt::format("a delta refit is predicted for bf16 and fp32 weights (the synthetic "
                    "update's), not {}",
                    dtype_name(dtype)));
  // Each of the piece's n elements changes with probability f: some does with 1 - (1 - f)^n.
  const double elements = static_cast<double>(bytes / dtype_size(dtype));
  const double some_change = -std::expm1(elements * std::log1p(-std::min(change_fraction_, 1.0 - 1e-16)));
  const double payload =
      static_cast<double>(kDeltaHeaderBytes) + body_ratio(dtype) * static_cast<double>(bytes);
  return change_fraction_ >= 1.0 ? payload : some_change * payload;
}

}  // namespace refit
