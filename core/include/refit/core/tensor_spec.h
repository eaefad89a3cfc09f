#pragma once
#include <string>

#include "refit/core/box.h"
#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit {

inline constexpr std::size_t kMaxTensorDims = 8;

struct TensorSpec {
  std::string name;
  Shape shape;
  DType dtype = DType::kBF16;

  Bytes bytes() const { return Bytes{element_count(shape) * dtype_size(dtype)}; }
  bool operator==(const TensorSpec&) const = default;
};

// Checks 1..8 dims, non-negative sizes, a non-empty name.
[[nodiscard]] Result<TensorSpec> make_tensor_spec(std::string name, Shape shape, DType dtype);

}  // namespace refit
