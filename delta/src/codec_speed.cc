#include "refit/delta/codec_speed.h"

#include <algorithm>
#include <array>
#include <cmath>

namespace refit {
namespace {

struct Measured {
  double fraction;
  double encode_gbps;
  double decode_gbps;
};

// bench/RESULTS.md, section "Delta codec": bf16, "smallest" (the codec's choice) columns of the
// encode and decode tables.
constexpr std::array<Measured, 6> kBf16{{{0.001, 5.13, 116},
                                         {0.01, 2.62, 8.82},
                                         {0.03, 1.34, 4.09},
                                         {0.1, 0.52, 1.38},
                                         {0.3, 0.28, 0.76},
                                         {1.0, 0.26, 0.54}}};
// The same page: "The checksum (checksum_of ...): 6.35 GB/s".
constexpr double kChecksumGbps = 6.35;
// bench/RESULTS.md, "Quantization", CPU quantize: 0.76-0.90 GB/s of bf16 for both schemes,
// contiguous and row strided, one core.
constexpr double kQuantizeGbps = 0.85;

double log_interpolate(double x, double x0, double x1, double y0, double y1) {
  const double t = (std::log(x) - std::log(x0)) / (std::log(x1) - std::log(x0));
  return std::exp(std::log(y0) + t * (std::log(y1) - std::log(y0)));
}

}  // namespace

DeltaCodecSpeed delta_cpu_codec_speed(double change_fraction) {
  const double f = std::clamp(change_fraction, kBf16.front().fraction, kBf16.back().fraction);
  auto hi = std::ranges::lower_bound(kBf16, f, {}, &Measured::fraction);
  if (hi == kBf16.begin()) ++hi;
  const auto lo = hi - 1;
  return DeltaCodecSpeed{.encode = BytesPerSecond::from_gbps(log_interpolate(
                             f, lo->fraction, hi->fraction, lo->encode_gbps, hi->encode_gbps)),
                         .decode = BytesPerSecond::from_gbps(log_interpolate(
                             f, lo->fraction, hi->fraction, lo->decode_gbps, hi->decode_gbps)),
                         .audit = BytesPerSecond::from_gbps(kChecksumGbps),
                         .quantize = BytesPerSecond::from_gbps(kQuantizeGbps)};
}

}  // namespace refit
