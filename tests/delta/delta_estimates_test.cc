// What predictions of a delta refit rest on: the CPU codec's measured speeds (interpolated
// between the measured change fractions) and payloads measured on a synthetic sample.
#include <gtest/gtest.h>

#include <cmath>

#include "refit/delta/codec_speed.h"
#include "refit/delta/payload_estimate.h"

namespace refit {
namespace {

TEST(DeltaCodecSpeed, MeasuredPointsAreTheBenchmarksAndBetweenThemItInterpolates) {
  // bench/RESULTS.md, bf16, the codec's choice: 1 %: 2.62 GB/s encode, 8.82 decode; 3 %: 1.34, 4.09.
  EXPECT_NEAR(delta_cpu_codec_speed(0.01).encode.gbps(), 2.62, 1e-9);
  EXPECT_NEAR(delta_cpu_codec_speed(0.03).decode.gbps(), 4.09, 1e-9);
  // Halfway in log(fraction) between 1 % and 3 %: the geometric mean of the speeds.
  EXPECT_NEAR(delta_cpu_codec_speed(std::sqrt(0.01 * 0.03)).encode.gbps(), std::sqrt(2.62 * 1.34), 1e-9);
  // Outside the measured range: the nearest measured figure.
  EXPECT_NEAR(delta_cpu_codec_speed(0.0).encode.gbps(), 5.13, 1e-9);
  EXPECT_NEAR(delta_cpu_codec_speed(2.0).decode.gbps(), 0.54, 1e-9);
  double previous = 1e300;
  for (const double f : {0.001, 0.002, 0.01, 0.05, 0.1, 0.5, 1.0}) {
    EXPECT_LE(delta_cpu_codec_speed(f).encode.value, previous);
    previous = delta_cpu_codec_speed(f).encode.value;
  }
}

TensorSpec tensor(DType dtype) { return TensorSpec{.name = "w", .shape = {64}, .dtype = dtype}; }

TEST(DeltaPayloadEstimate, MatchesTheBenchmarksRatiosAndWeighsByTheChanceOfAChange) {
  const auto at_1pct = DeltaPayloadEstimate::measure(SyntheticUpdate{.change_fraction = 0.01}).value();
  const auto bf16 = at_1pct.sample(tensor(DType::kBF16)).value();
  // bench/RESULTS.md at 1 % changed, 8 MiB: 0.80 % (bf16) and 1.00 % (fp32) of dense; a 2 MiB
  // sample packs about as well. Every element the update picks changes: the share is 1 %.
  EXPECT_NEAR(bf16.body_ratio, 0.008, 0.002);
  EXPECT_NEAR(at_1pct.sample(tensor(DType::kFP32)).value().body_ratio, 0.010, 0.002);
  EXPECT_EQ(bf16.changed_share, 0.01);
  // A large piece changes for sure: header + ratio * bytes.
  const std::int64_t big = std::int64_t{1} << 26;
  EXPECT_NEAR(at_1pct.expected_bytes(big, tensor(DType::kBF16)).value(),
              56 + bf16.body_ratio * static_cast<double>(big), 1e-6);
  // One bf16 element changes with probability 1 %.
  EXPECT_NEAR(at_1pct.expected_bytes(2, tensor(DType::kBF16)).value(), 0.01 * (56 + bf16.body_ratio * 2),
              1e-12);
  // fp8 that is no quantized weight, or of a scheme not measured, is refused, naming the tensor.
  const auto fp8 = at_1pct.expected_bytes(64, tensor(DType::kFP8E4M3));
  ASSERT_FALSE(fp8);
  EXPECT_NE(fp8.error().message.find("tensor 'w'"), std::string::npos) << fp8.error().message;
  auto values = tensor(DType::kFP8E4M3);
  values.quantization = Quantization{.scheme = QuantScheme::kMxfp8};
  EXPECT_FALSE(at_1pct.expected_bytes(64, values));
  const auto none = DeltaPayloadEstimate::measure(SyntheticUpdate{.change_fraction = 0.0}).value();
  EXPECT_EQ(none.expected_bytes(big, tensor(DType::kBF16)).value(), 0.0);
}

}  // namespace
}  // namespace refit
