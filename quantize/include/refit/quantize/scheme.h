#pragma once
// Quantization schemes refit applies to bf16 weights on their way to an fp8 inference engine: the
// dtypes of the values and scales they produce and the block of elements each scale covers.
// Pure geometry; quantize.h quantizes, fp8_rules.h holds the arithmetic (and defines Scheme, so
// that the CUDA kernel, compiled as C++20 without the refit headers, shares it).
//
// Weights of fewer than 2 dims (biases, norms) are never quantized: callers refuse them before
// calling anything here (quantize_checked does). The geometry below is meant for dims >= 2; a
// 1-dim shape gets the last dim's block only.
#include <cstddef>
#include <span>
#include <string_view>

#include "refit/core/box.h"
#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/quantize/fp8_rules.h"

namespace refit {

// "fp8-block128", "mxfp8": as the command line and manifests spell them.
std::string_view scheme_name(Scheme scheme);
// Accepts scheme_name's spellings; an error names the text and the accepted names.
[[nodiscard]] Result<Scheme> parse_scheme(std::string_view text);
std::span<const Scheme> all_schemes();

// fp8_e4m3 for both.
DType value_dtype(Scheme scheme);
// fp32 (block128's weight_scale_inv) or fp8_e8m0 (mxfp8).
DType scale_dtype(Scheme scheme);

// Elements per block along each of a weight's `dims` dims (dims >= 2): block128 is 128 on the
// last two dims and 1 on leading (stacked-expert) dims; mxfp8 is 32 on the last dim, 1 elsewhere.
Shape block_extent(Scheme scheme, std::size_t dims);
// ceil(weight / block) per dim: one scale per block, a ragged last block included.
Shape scale_shape(Scheme scheme, const Shape& weight);
// The blocks a box of the weight touches, in scale coordinates: floor(lo / b) .. ceil(hi / b) per
// dim (an empty extent stays empty).
Box scale_box(Scheme scheme, const Box& weight_box);
// Whether every boundary of `box` is a multiple of the block or the weight's edge, so the box
// holds whole blocks only and can be quantized on its own.
bool block_aligned(Scheme scheme, const Box& box, const Shape& weight);

}  // namespace refit
