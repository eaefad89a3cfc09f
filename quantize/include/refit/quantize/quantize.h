#pragma once
// The CPU quantizer: a block-aligned box of a bf16 weight, held as a strided view, into fp8 e4m3
// values and one scale per block (scheme.h). Bit for bit what the CUDA kernel of the NCCL
// executor computes: both call fp8_rules.h for every element and every block.
#include <cstddef>
#include <cstdint>
#include <span>

#include "refit/core/box.h"
#include "refit/core/error.h"
#include "refit/quantize/scheme.h"

namespace refit {

// A box of bf16 elements (their bits) in memory: element (i0, i1, ...) is at
// data[i0 * strides[0] + i1 * strides[1] + ...]. Strides count elements and are >= 0; the last
// dim is fastest when its stride is 1 (the vectorised path; any stride works).
struct Bf16View {
  const std::uint16_t* data = nullptr;
  Shape shape;
  Shape strides;
};

// Bytes of the scales of a box of `shape`: element_count(scale_shape) x the scale dtype's size.
std::int64_t scale_buffer_bytes(Scheme scheme, const Shape& shape);

// Quantizes `in` into `values` (row-major in.shape, one e4m3 byte per element) and `scales`
// (row-major scale_shape(scheme, in.shape), scale_dtype(scheme) in host byte order).
// Preconditions (quantize_checked checks them): in.shape has >= 2 dims and as many strides;
// values.size() == element_count(in.shape); scales.size() == scale_buffer_bytes(scheme, in.shape).
// The view's first element is a block corner, so blocks are cut from it; the last block along a
// dim may be ragged (the weight's edge), and is scaled by the elements it has.
void quantize(Scheme scheme, const Bf16View& in, std::span<std::uint8_t> values, std::span<std::byte> scales);

// quantize() after checking its preconditions; an error names the size that is wrong.
[[nodiscard]] Result<void> quantize_checked(Scheme scheme, const Bf16View& in, std::span<std::uint8_t> values,
                                            std::span<std::byte> scales);

}  // namespace refit
