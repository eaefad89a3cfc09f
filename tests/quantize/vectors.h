#pragma once
// The reference vectors of tests/data/quantize/vectors.json (made by make_vectors.py from the
// framework functions with numpy and ml_dtypes) and small helpers the quantize tests share.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "refit/core/box.h"
#include "refit/quantize/quantize.h"
#include "refit/quantize/scheme.h"

namespace refit::testing {

struct Expected {
  std::vector<std::uint8_t> values;
  std::vector<std::byte> scales;
};

struct VectorCase {
  std::string name;
  Shape shape;
  std::vector<std::uint16_t> input;  // bf16 bits, row-major
  Expected block128;
  Expected mxfp8;
  const Expected& expected(Scheme s) const { return s == Scheme::kMxfp8 ? mxfp8 : block128; }
};

const std::vector<VectorCase>& reference_vectors();

// Row-major strides of a shape, in elements.
Shape row_major_strides(const Shape& shape);

// The value an e4m3fn byte encodes (NaN for 0x7F and 0xFF).
double e4m3_value(std::uint8_t code);

// The quantizer's output for a view, in freshly sized buffers.
Expected quantize_view(Scheme scheme, const Bf16View& view);

}  // namespace refit::testing
