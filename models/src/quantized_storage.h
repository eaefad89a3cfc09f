#pragma once
// FP8 in flight in the frameworks' parameters (docs/quantization.md, "Framework storage"): a
// quantised weight lies where its rule puts it, in the dtype each side holds, and its scales lie
// in a parameter of their own beside the weight's parameter, one scale per block of it, as vLLM's
// block FP8 keeps them.
#include "refit/core/tensor_spec.h"
#include "storage_rules.h"

namespace refit::models::detail {

// Where `rule` puts problem tensor `spec` (t.tensor is the model's weight it is, or for a
// quantised weight's scales the weight's): the weight in the dtype the side holds of it (bf16
// on a training rank that quantises it, fp8 on an inference rank), its scales at the blocks of
// the weight's parameters. Errors name the parameter whose blocks would mix two weights.
[[nodiscard]] Result<Stored> placed(const TensorOnRank& t, const TensorSpec& spec, const StorageRule& rule);

// The scales of a weight the rule placed as `weight` (in weight elements): per parameter a
// parameter quant_scale_name(scheme, name) of one scale per block of it, each region at the block
// of its first element. `scales` is the scales tensor's index, `weight_shape` the weight's.
[[nodiscard]] Result<Stored> scales_stored(const Stored& weight, QuantScheme scheme, std::uint32_t scales,
                                           const Shape& weight_shape);

}  // namespace refit::models::detail
