#include "refit/core/tensor_spec.h"

#include <fmt/format.h>

namespace refit {

Result<TensorSpec> make_tensor_spec(std::string name, Shape shape, DType dtype) {
  if (name.empty()) return invalid("tensor name is empty");
  if (shape.empty() || shape.size() > kMaxTensorDims)
    return invalid(
        fmt::format("tensor '{}': shape has {} dims, expected 1 to {}", name, shape.size(), kMaxTensorDims));
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < 0)
      return invalid(fmt::format("tensor '{}': shape[{}] is {}, must be >= 0", name, d, shape[d]));
  return TensorSpec{std::move(name), std::move(shape), dtype};
}

}  // namespace refit
