#pragma once
// FP8 in flight in the frameworks' parameters (docs/quantization.md, "Framework storage"): a
// quantized weight lies where its rule puts it, in the dtype each side holds, and its scales lie
// in a parameter of their own beside the weight's parameter, one scale per block of it, as vLLM's
// block FP8 keeps them.
#include "refit/core/tensor_spec.h"
#include "storage_rules.h"

namespace refit::models::detail {

// vLLM's block FP8 keeps a weight parameter's scales in `<name>_scale_inv` (MXFP8 `<name>_scale`),
// one scale per block of the whole parameter (fp8_utils.create_fp8_scale_parameter).
[[nodiscard]] Result<FrameworkParameter> vllm_scale_parameter(QuantScheme scheme,
                                                              const FrameworkParameter& weight);

// Transformer Engine keeps an fp8 parameter trained with the blockwise recipe as a
// Float8BlockwiseQTensor: its fp8 values ([M, K] row-major, what the weight's parameter is here)
// and fp32 rowwise scales of [ceil(M/128), roundup(ceil(K/128), 4)] (Float8BlockQuantizer
// .get_scale_shape: the inner dim padded to 4 for the GEMM; the padding columns are never read),
// the attribute `_rowwise_scale_inv`, named here `<name>._rowwise_scale_inv`. MXFP8 parameters
// (swizzled e8m0 scales) have no rule.
[[nodiscard]] Result<FrameworkParameter> te_scale_parameter(QuantScheme scheme,
                                                            const FrameworkParameter& weight);

// Where `rule` puts problem tensor `spec` (t.tensor is the model's weight it is, or for a
// quantized weight's scales the weight's): the weight in the dtype the side holds of it (bf16
// on a training rank that quantizes it, fp8 on an inference rank or one trained in fp8), its
// scales at the blocks of the weight's parameters in the parameters `scales` names. Errors name
// the parameter whose blocks would mix two weights.
[[nodiscard]] Result<Stored> placed(const TensorOnRank& t, const TensorSpec& spec, const StorageRule& rule,
                                    const ScaleParameterRule& scales);

// The scales of a weight the rule placed as `weight` (in weight elements): per parameter the
// parameter `scale_parameter` names, of one scale per block of it, each region at the block of its
// first element. `scales` is the scales tensor's index, `weight_shape` the weight's.
[[nodiscard]] Result<Stored> scales_stored(const Stored& weight, QuantScheme scheme, std::uint32_t scales,
                                           const Shape& weight_shape,
                                           const ScaleParameterRule& scale_parameter);

}  // namespace refit::models::detail
