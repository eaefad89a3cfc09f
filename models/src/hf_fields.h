#pragma once
// The config.json fields that decide a model's weights, validated and with defaults applied:
// hf_config.cc reads them, model_tensors.cc turns them into tensors.
#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/dtype.h"
#include "refit/models/hf_config.h"
#include "refit/models/model_spec.h"

namespace refit::models {

// Multi-head latent attention (DeepSeek-V3, Kimi-K2).
struct MlaFields {
  std::optional<std::int64_t> q_lora_rank;  // none: a plain q_proj instead of q_a/q_b
  std::int64_t kv_lora_rank = 0;
  std::int64_t qk_nope_head_dim = 0;
  std::int64_t qk_rope_head_dim = 0;
  std::int64_t v_head_dim = 0;
};

struct MoeFields {
  std::int64_t num_experts = 0;
  std::int64_t intermediate = 0;          // per routed expert
  std::int64_t shared_intermediate = 0;   // all shared experts together; 0 when none
  bool score_correction_bias = false;     // DeepSeek-V3's router bias
  std::int64_t expert_groups = 1;         // DeepSeek's n_group: vLLM's num_expert_group
  std::string_view module;                // "mlp" or Mixtral's "block_sparse_moe"
  std::array<std::string_view, 3> names;  // HF names of the gate, up, down projections
};

struct HfFields {
  std::string architecture;  // canonical model_type
  DType dtype = DType::kBF16;
  std::int64_t hidden = 0;
  std::int64_t layers = 0;
  std::int64_t mtp_layers = 0;  // included MTP layers
  std::int64_t heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t head_dim = 0;
  std::int64_t intermediate = 0;  // dense MLP; 0 when every layer is MoE
  std::int64_t vocab = 0;
  bool tied_embeddings = false;
  bool qkv_bias = false;
  bool o_bias = false;
  bool mlp_bias = false;
  bool qk_norm = false;
  std::optional<MlaFields> mla;
  std::optional<MoeFields> moe;
  std::vector<bool> moe_layer;  // per decoder layer, then per MTP layer
};

// Refuses a model of more than limits::kMaxTensors tensors (before building them: layers x experts can
// ask for 2^40), a tensor of more than limits::kMaxElements, or more than limits::kMaxBytes.
[[nodiscard]] Result<ModelSpec> make_model_spec(const HfFields& fields, const HfOptions& options,
                                                std::string name);

}  // namespace refit::models
