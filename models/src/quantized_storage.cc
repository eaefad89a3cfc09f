#include "quantized_storage.h"

#include <optional>

#include <fmt/format.h>

#include "refit/core/quantized_problem.h"
#include "refit/core/try.h"

namespace refit::models::detail {
namespace {

// The dim of a parameter that a step of `stride` elements advances by one (the innermost if
// dims of size 1 share a stride).
std::optional<std::size_t> dim_of_stride(const Shape& strides, std::int64_t stride) {
  for (std::size_t k = strides.size(); k-- > 0;)
    if (strides[k] == stride) return k;
  return std::nullopt;
}

// One region of the weight in parameter `p` as a region of the scales in p's scales parameter.
// vLLM gives a fused parameter one scale per block of the whole parameter
// (fp8_utils.create_fp8_scale_parameter: [ceil(sum(output_partition_sizes) / 128),
// ceil(input_size_per_partition / 128)]) and loads each part's scales at its offset in blocks
// (MergedColumnParallelLinear / QKVParallelLinear.weight_loader_v2 divide a
// BlockQuantScaleParameter's shard offset by the block); that is the region's block only when
// the region starts on a block of the parameter, which validate_fp8_block_shape requires of every
// part but the last.
[[nodiscard]] Result<StoredRegion> scale_region(const StoredRegion& r, const FrameworkParameter& p,
                                                const FrameworkParameter& scale_parameter, QuantScheme s,
                                                std::uint32_t scales, const Shape& weight) {
  if (!quant_block_aligned(s, r.box, weight))
    return unsupported(fmt::format("parameter '{}' holds the weight's box {}, which cuts its {} blocks",
                                   p.name, r.box.to_string(), quant_scheme_name(s)));
  const Shape strides = row_major_strides(p.shape);
  const Shape block = quant_block(s, p.shape.size());
  const Shape weight_block = quant_block(s, r.box.rank());
  const Shape scale_strides = row_major_strides(scale_parameter.shape);
  StoredRegion out{.tensor = scales,
                   .box = quant_scale_box(s, r.box),
                   .parameter = r.parameter,
                   .offset = 0,
                   .strides = Shape(r.box.rank(), 0)};
  std::int64_t rest = r.offset;
  for (std::size_t k = 0; k < p.shape.size(); ++k) {
    const auto at = rest / strides[k];
    rest %= strides[k];
    if (at % block[k] != 0)
      return unsupported(fmt::format(
          "parameter '{}' holds the weight's box {} from element {} of its dim {}, inside a {} block that "
          "would also scale its neighbour",
          p.name, r.box.to_string(), at, k, quant_scheme_name(s)));
    out.offset += at / block[k] * scale_strides[k];
  }
  for (std::size_t d = 0; d < r.box.rank(); ++d) {
    const auto k = dim_of_stride(strides, r.strides[d]);
    if (k && block[*k] == weight_block[d])
      out.strides[d] = scale_strides[*k];
    else if (out.box.extent[d] > 1)  // with one scale along d its stride is never taken
      return unsupported(
          fmt::format("parameter '{}' holds dim {} of the weight along a dim of other blocks", p.name, d));
  }
  return out;
}

}  // namespace

Result<FrameworkParameter> vllm_scale_parameter(QuantScheme scheme, const FrameworkParameter& weight) {
  return FrameworkParameter{.name = quant_scale_name(scheme, weight.name),
                            .shape = quant_scale_shape(scheme, weight.shape),
                            .dtype = quant_scale_dtype(scheme)};
}

Result<FrameworkParameter> te_scale_parameter(QuantScheme scheme, const FrameworkParameter& weight) {
  if (scheme != QuantScheme::kFp8Block128)
    return unsupported(fmt::format(
        "parameter '{}': Transformer Engine's {} parameters keep swizzled scales, which have no storage rule",
        weight.name, quant_scheme_name(scheme)));
  if (weight.shape.size() != 2)
    return unsupported(
        fmt::format("parameter '{}' has {} dims; fp8 parameters are 2-D", weight.name, weight.shape.size()));
  const Shape grid = quant_scale_shape(scheme, weight.shape);
  constexpr std::int64_t kInnerMultiple = 4;  // Float8BlockQuantizer pads the inner dim for cuBLAS
  return FrameworkParameter{
      .name = weight.name + "._rowwise_scale_inv",
      .shape = {grid[0], (grid[1] + kInnerMultiple - 1) / kInnerMultiple * kInnerMultiple},
      .dtype = quant_scale_dtype(scheme)};
}

Result<Stored> scales_stored(const Stored& weight, QuantScheme scheme, std::uint32_t scales,
                             const Shape& weight_shape, const ScaleParameterRule& scale_parameter) {
  Stored out;
  for (const auto& p : weight.parameters) out.parameters.push_back(REFIT_TRY(scale_parameter(scheme, p)));
  for (const auto& r : weight.regions) {
    const auto p = static_cast<std::size_t>(r.parameter);
    out.regions.push_back(
        REFIT_TRY(scale_region(r, weight.parameters[p], out.parameters[p], scheme, scales, weight_shape)));
  }
  return out;
}

Result<Stored> placed(const TensorOnRank& t, const TensorSpec& spec, const StorageRule& rule,
                      const ScaleParameterRule& scales) {
  if (!spec.quantization || !spec.quantization->is_scales()) {
    auto out = REFIT_TRY(rule(t));
    for (auto& p : out.parameters) p.dtype = held_dtype(spec, t.source);
    return out;
  }
  // The weight's box on this rank, placed by its rule: the scales follow its blocks.
  TensorOnRank weight = t;
  weight.index = t.names->at(spec.quantization->scales_of);
  weight.box = REFIT_TRY(t.sibling(spec.quantization->scales_of));
  return scales_stored(REFIT_TRY(rule(weight)), spec.quantization->scheme, t.index, t.tensor->spec.shape,
                       scales);
}

}  // namespace refit::models::detail
