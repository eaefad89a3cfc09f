// The estimate of FP8 deltas (payload_estimate.h) against the codec itself. A bf16 weight of
// another shape and seed than the estimate's sample is stepped by the synthetic update and
// quantized after every step by the library's quantizer; it is cut into slabs of rows, as a plan
// cuts a weight into pieces, and each slab's fp8 values and its scales are encoded against the
// step before as the delta executor encodes a piece (a piece whose bits did not change sends
// nothing). The estimate of a piece of b bytes is P(some element changed) (56 + body ratio x b),
// with P = 1 - (1 - p)^n for its n elements and p the sample's changed share. Summed over the
// pieces and averaged over the steps it must come within 10 % of what the codec sends (values,
// and values and scales together) for slabs of 2048 rows, whose 4 MiB of values are the size of
// the sample's; zstd packs smaller chunks less well, so for slabs of 256 rows (512 KiB) the
// codec sends more than the estimate, by less than 20 %.
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "refit/core/quantization.h"
#include "refit/delta/codec.h"
#include "refit/delta/payload_estimate.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

using Chunk = std::vector<std::byte>;

const Shape kShape{4096, 2048};
// A step rescales the few blocks whose amax it changes (1.6 % of fp8-block128's at 1 % changed):
// 8 steps of the 512 blocks give about 65 such events at 1 %.
constexpr std::int64_t kSteps = 8;

struct Slabs {
  std::int64_t rows;
  double tolerance;   // of estimate / codec: below 1 + tolerance and above 1 - tolerance
  double values = 0;  // what the codec sends per step, summed over the slabs
  double scales = 0;
};

std::pair<Chunk, Chunk> quantized(QuantScheme scheme, const Chunk& bf16) {
  Chunk values(bf16.size() / 2);
  Chunk scales(static_cast<std::size_t>(scale_buffer_bytes(scheme, kShape)));
  quantize(scheme,
           Bf16View{.data = reinterpret_cast<const std::uint16_t*>(bf16.data()),
                    .shape = kShape,
                    .strides = row_major_strides(kShape)},
           std::span(reinterpret_cast<std::uint8_t*>(values.data()), values.size()), scales);
  return {std::move(values), std::move(scales)};
}

// What the codec sends of `after` against `before`, slab by slab of `slab` bytes.
double sent(const Chunk& before, const Chunk& after, std::size_t slab, DType dtype) {
  DeltaCodec codec;
  Chunk out(
      static_cast<std::size_t>(delta_payload_capacity(static_cast<std::int64_t>(slab), dtype_size(dtype))));
  double total = 0;
  for (std::size_t at = 0; at < before.size(); at += slab) {
    const auto base = std::span(before).subspan(at, slab);
    const auto header = codec
                            .encode({.baseline = base,
                                     .current = std::span(after).subspan(at, slab),
                                     .dtype = dtype,
                                     .base = checksum_of(base)},
                                    out)
                            .value();
    if (header.changed_elements > 0) total += static_cast<double>(header.payload_bytes());
  }
  return total;
}

TensorSpec part(QuantScheme scheme, QuantSite site, bool scales) {
  return TensorSpec{
      .name = scales ? "w_scale" : "w",
      .shape = scales ? quant_scale_shape(scheme, kShape) : kShape,
      .dtype = scales ? quant_scale_dtype(scheme) : quant_value_dtype(scheme),
      .quantization = Quantization{.scheme = scheme, .site = site, .scales_of = scales ? "w" : ""}};
}

TEST(Fp8PayloadEstimate, SumsOverPiecesToWhatTheCodecSendsOfQuantizedDeltas) {
  for (const auto scheme : all_quant_schemes())
    for (const double fraction : {0.01, 0.03}) {
      SCOPED_TRACE(::testing::Message() << quant_scheme_name(scheme) << " " << fraction);
      const SyntheticUpdate update{.change_fraction = fraction, .seed = 7};
      Chunk bf16(static_cast<std::size_t>(element_count(kShape) * 2));
      ASSERT_TRUE(fill_synthetic_weights(bf16, DType::kBF16, 0, update.seed));
      auto before = quantized(scheme, bf16);
      std::array slabs{Slabs{.rows = 2048, .tolerance = 0.10}, Slabs{.rows = 256, .tolerance = 0.20}};
      for (std::int64_t step = 1; step <= kSteps; ++step) {
        ASSERT_TRUE(apply_synthetic_step(bf16, DType::kBF16, 0, update, step));
        auto after = quantized(scheme, bf16);
        for (auto& c : slabs) {
          const auto n = static_cast<std::size_t>(kShape[0] / c.rows);
          c.values +=
              sent(before.first, after.first, before.first.size() / n, quant_value_dtype(scheme)) / kSteps;
          c.scales +=
              sent(before.second, after.second, before.second.size() / n, quant_scale_dtype(scheme)) / kSteps;
        }
        before = std::move(after);
      }
      const auto estimate =
          DeltaPayloadEstimate::measure(SyntheticUpdate{.change_fraction = fraction}, std::array{scheme})
              .value();
      const auto values_spec = part(scheme, QuantSite::kSender, false);
      const auto scales_spec = part(scheme, QuantSite::kSender, true);
      for (const auto& c : slabs) {
        SCOPED_TRACE(::testing::Message() << "slabs of " << c.rows << " rows");
        const auto n = kShape[0] / c.rows;
        const auto expect = [&](std::size_t bytes, const TensorSpec& spec) {
          return static_cast<double>(n) *
                 estimate.expected_bytes(static_cast<std::int64_t>(bytes) / n, spec).value();
        };
        const double values = expect(before.first.size(), values_spec);
        const double both = values + expect(before.second.size(), scales_spec);
        EXPECT_NEAR(values / c.values, 1.0, c.tolerance);
        EXPECT_NEAR(both / (c.values + c.scales), 1.0, c.tolerance);
      }
      // Far fewer fp8 values change than bf16 elements (a small step mostly rounds to the same fp8).
      EXPECT_LT(estimate.sample(values_spec).value().changed_share, fraction);
      // Weights trained in fp8 (a bf16 master quantized at the training ranks) send the same.
      EXPECT_EQ(estimate.expected_bytes(4096, part(scheme, QuantSite::kTraining, false)).value(),
                estimate.expected_bytes(4096, values_spec).value());
    }
}

}  // namespace
}  // namespace refit
