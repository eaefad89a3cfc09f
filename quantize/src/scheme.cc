#include "refit/quantize/scheme.h"

#include <array>
#include <string>

namespace refit {
namespace {

constexpr std::array<Scheme, 2> kSchemes{Scheme::kFp8Block128, Scheme::kMxfp8};

}  // namespace

std::string_view scheme_name(Scheme scheme) { return scheme == Scheme::kMxfp8 ? "mxfp8" : "fp8-block128"; }

Result<Scheme> parse_scheme(std::string_view text) {
  for (Scheme s : kSchemes)
    if (scheme_name(s) == text) return s;
  return invalid("unknown quantization scheme '" + std::string(text) + "' (expected fp8-block128 or mxfp8)");
}

std::span<const Scheme> all_schemes() { return kSchemes; }

DType value_dtype(Scheme) { return DType::kFP8E4M3; }

DType scale_dtype(Scheme scheme) { return scheme == Scheme::kMxfp8 ? DType::kFP8E8M0 : DType::kFP32; }

Shape block_extent(Scheme scheme, std::size_t dims) {
  // Callers never pass dims < 2 (scheme.h); the checks keep such a call defined all the same.
  Shape block(dims, 1);
  if (dims >= 1) block[dims - 1] = scheme == Scheme::kMxfp8 ? 32 : 128;
  if (dims >= 2 && scheme == Scheme::kFp8Block128) block[dims - 2] = 128;
  return block;
}

Shape scale_shape(Scheme scheme, const Shape& weight) {
  const Shape block = block_extent(scheme, weight.size());
  Shape out(weight.size());
  for (std::size_t d = 0; d < weight.size(); ++d) out[d] = (weight[d] + block[d] - 1) / block[d];
  return out;
}

Box scale_box(Scheme scheme, const Box& weight_box) {
  const Shape block = block_extent(scheme, weight_box.rank());
  Box out{Shape(weight_box.rank()), Shape(weight_box.rank())};
  for (std::size_t d = 0; d < weight_box.rank(); ++d) {
    const std::int64_t lo = weight_box.offset[d];
    const std::int64_t hi = lo + weight_box.extent[d];
    out.offset[d] = lo / block[d];
    out.extent[d] = weight_box.extent[d] == 0 ? 0 : (hi + block[d] - 1) / block[d] - out.offset[d];
  }
  return out;
}

bool block_aligned(Scheme scheme, const Box& box, const Shape& weight) {
  const Shape block = block_extent(scheme, box.rank());
  for (std::size_t d = 0; d < box.rank(); ++d) {
    const std::int64_t hi = box.offset[d] + box.extent[d];
    if (box.offset[d] % block[d] != 0) return false;
    if (hi % block[d] != 0 && hi != weight[d]) return false;
  }
  return true;
}

}  // namespace refit
