#pragma once
// Which weights an FP8 vLLM engine keeps quantized, by their Hugging Face names.
#include <string_view>

namespace refit::models {

// vLLM's Fp8Config quantizes the layers that take a quantization method: every LinearBase
// (q/k/v/o, gate/up/down, MLA's q_a/q_b/kv_a/kv_b projections; names ending in "_proj.weight")
// and FusedMoE's experts. It keeps in the checkpoint's dtype what is built without one: the
// embedding and lm_head (VocabParallelEmbedding, ParallelLMHead), norms, the MoE router (a
// ReplicatedLinear built with quant_config=None, "...gate.weight"), biases, the router's
// e_score_correction_bias, and DeepSeek's MTP eh_proj (a plain torch Linear).
bool fp8_engine_quantizes(std::string_view hf_name);

}  // namespace refit::models
