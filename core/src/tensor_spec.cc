#include "refit/core/tensor_spec.h"

#include <unordered_map>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit {

bool held_at_source(const TensorSpec& t) {
  const auto& q = t.quantization;
  return !(q && ((q->site == QuantSite::kSender && q->is_scales()) || q->made_at_landing()));
}

DType held_dtype(const TensorSpec& t, bool source) {
  const bool quantized_here = t.quantization && t.quantization->site == QuantSite::kSender;
  return source && quantized_here ? t.quantization->from : t.dtype;
}

std::vector<std::int32_t> quantization_partners(std::span<const TensorSpec> tensors) {
  std::unordered_map<std::string_view, std::int32_t> index;
  for (std::size_t i = 0; i < tensors.size(); ++i)
    index.emplace(tensors[i].name, static_cast<std::int32_t>(i));
  std::vector<std::int32_t> out(tensors.size(), -1);
  for (std::size_t i = 0; i < tensors.size(); ++i) {
    const auto& q = tensors[i].quantization;
    if (!q || !q->is_scales() || q->site != QuantSite::kSender) continue;
    if (const auto it = index.find(q->scales_of); it != index.end()) {
      out[i] = it->second;
      out[static_cast<std::size_t>(it->second)] = static_cast<std::int32_t>(i);
    }
  }
  return out;
}

std::vector<LandingWeight> landing_weights(std::span<const TensorSpec> tensors) {
  std::unordered_map<std::string_view, std::uint32_t> values, scales;
  for (std::uint32_t i = 0; i < tensors.size(); ++i) {
    const auto& q = tensors[i].quantization;
    if (!q || !q->made_at_landing()) continue;
    (q->is_scales() ? scales : values).emplace(q->is_scales() ? q->scales_of : tensors[i].name, i);
  }
  std::vector<LandingWeight> out;
  for (std::uint32_t i = 0; i < tensors.size(); ++i) {
    const auto& q = tensors[i].quantization;
    if (!q || !q->is_landing_copy()) continue;
    const auto v = values.find(q->landing_of);
    const auto s = scales.find(q->landing_of);
    if (v != values.end() && s != scales.end())
      out.push_back(LandingWeight{.values = v->second, .scales = s->second, .copy = i});
  }
  return out;
}

Result<TensorSpec> make_tensor_spec(std::string name, Shape shape, DType dtype) {
  if (name.empty()) return invalid("tensor name is empty");
  if (shape.empty() || shape.size() > kMaxTensorDims)
    return out_of_range(
        fmt::format("tensor '{}': shape has {} dims, expected 1 to {}", name, shape.size(), kMaxTensorDims));
  for (std::size_t d = 0; d < shape.size(); ++d)
    if (shape[d] < 0)
      return out_of_range(fmt::format("tensor '{}': shape[{}] is {}, must be >= 0", name, d, shape[d]));
  // Capped so that bytes() = elements x dtype size, and sums of it, never overflow.
  REFIT_TRY_IN(checked_product(shape, limits::kMaxElements, "elements"), fmt::format("tensor '{}'", name));
  return TensorSpec{.name = std::move(name), .shape = std::move(shape), .dtype = dtype};
}

}  // namespace refit
