#pragma once
// The reference vectors of tests/data/quantize/vectors.json (made by make_vectors.py from the
// framework functions with numpy and ml_dtypes) and small helpers the quantize tests share.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/quantization.h"
#include "refit/quantize/quantize.h"

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
  const Expected& expected(QuantScheme s) const { return s == QuantScheme::kMxfp8 ? mxfp8 : block128; }
};

const std::vector<VectorCase>& reference_vectors();

using refit::row_major_strides;

// The value an e4m3fn byte encodes (NaN for 0x7F and 0xFF).
double e4m3_value(std::uint8_t code);

// The quantizer's output for a view, in freshly sized buffers.
Expected quantize_view(QuantScheme scheme, const Bf16View& view);

}  // namespace refit::testing
