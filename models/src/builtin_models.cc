// The built-in catalog: each model's public config.json (the fields refit reads, values as
// published on the Hugging Face hub), parsed by the same reader as a user's file.
#include "refit/models/builtin_models.h"
#include "refit/core/named_table.h"

#include <array>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace refit::models {
namespace {

constexpr std::string_view kQwen3_235B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "torch_dtype": "bfloat16",
  "hidden_size": 4096, "num_hidden_layers": 94, "num_attention_heads": 64,
  "num_key_value_heads": 4, "head_dim": 128, "attention_bias": false,
  "intermediate_size": 12288, "moe_intermediate_size": 1536, "num_experts": 128,
  "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "vocab_size": 151936, "tie_word_embeddings": false
})";

constexpr std::string_view kQwen3_30B = R"({
  "architectures": ["Qwen3MoeForCausalLM"], "model_type": "qwen3_moe", "torch_dtype": "bfloat16",
  "hidden_size": 2048, "num_hidden_layers": 48, "num_attention_heads": 32,
  "num_key_value_heads": 4, "head_dim": 128, "attention_bias": false,
  "intermediate_size": 6144, "moe_intermediate_size": 768, "num_experts": 128,
  "num_experts_per_tok": 8, "decoder_sparse_step": 1, "mlp_only_layers": [],
  "vocab_size": 151936, "tie_word_embeddings": false
})";

constexpr std::string_view kQwen3_8B = R"({
  "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "torch_dtype": "bfloat16",
  "hidden_size": 4096, "num_hidden_layers": 36, "num_attention_heads": 32,
  "num_key_value_heads": 8, "head_dim": 128, "attention_bias": false,
  "intermediate_size": 12288, "vocab_size": 151936, "tie_word_embeddings": false
})";

constexpr std::string_view kDeepseekV3 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "deepseek_v3",
  "torch_dtype": "bfloat16", "hidden_size": 7168, "num_hidden_layers": 61,
  "num_attention_heads": 128, "num_key_value_heads": 128, "q_lora_rank": 1536,
  "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
  "attention_bias": false, "intermediate_size": 18432, "moe_intermediate_size": 2048,
  "n_routed_experts": 256, "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 8, "topk_group": 4,
  "first_k_dense_replace": 3, "moe_layer_freq": 1, "topk_method": "noaux_tc",
  "num_nextn_predict_layers": 1, "vocab_size": 129280, "tie_word_embeddings": false
})";

constexpr std::string_view kKimiK2 = R"({
  "architectures": ["DeepseekV3ForCausalLM"], "model_type": "kimi_k2",
  "torch_dtype": "bfloat16", "hidden_size": 7168, "num_hidden_layers": 61,
  "num_attention_heads": 64, "num_key_value_heads": 64, "q_lora_rank": 1536,
  "kv_lora_rank": 512, "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
  "attention_bias": false, "intermediate_size": 18432, "moe_intermediate_size": 2048,
  "n_routed_experts": 384, "n_shared_experts": 1, "num_experts_per_tok": 8, "n_group": 1, "topk_group": 1,
  "first_k_dense_replace": 1, "moe_layer_freq": 1, "topk_method": "noaux_tc",
  "num_nextn_predict_layers": 0, "vocab_size": 163840, "tie_word_embeddings": false
})";

constexpr std::string_view kLlama31_405B = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
  "hidden_size": 16384, "num_hidden_layers": 126, "num_attention_heads": 128,
  "num_key_value_heads": 8, "intermediate_size": 53248, "attention_bias": false,
  "mlp_bias": false, "vocab_size": 128256, "tie_word_embeddings": false
})";

constexpr std::string_view kLlama31_8B = R"({
  "architectures": ["LlamaForCausalLM"], "model_type": "llama", "torch_dtype": "bfloat16",
  "hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
  "num_key_value_heads": 8, "intermediate_size": 14336, "attention_bias": false,
  "mlp_bias": false, "vocab_size": 128256, "tie_word_embeddings": false
})";

constexpr std::array<BuiltinModel, 8> kBuiltins{{
    {"qwen3-235b-a22b", kQwen3_235B},
    {"qwen3-30b-a3b", kQwen3_30B},
    {"qwen3-8b", kQwen3_8B},
    {"deepseek-v3", kDeepseekV3},
    {"deepseek-v3-mtp", kDeepseekV3, true},
    {"kimi-k2", kKimiK2},
    {"llama-3.1-405b", kLlama31_405B},
    {"llama-3.1-8b", kLlama31_8B},
}};

}  // namespace

std::span<const BuiltinModel> builtin_models() { return kBuiltins; }

Result<ModelSpec> builtin_model(std::string_view name, const HfOptions& options) {
  if (const auto* m = find_named(kBuiltins, name, &BuiltinModel::name)) {
    HfOptions with_mtp = options;
    with_mtp.include_mtp = options.include_mtp || m->include_mtp;
    return parse_hf_config(m->config_json, with_mtp, std::string(m->name));
  }
  return not_found(
      fmt::format("unknown model '{}' (built-in: {})", name, names_of(kBuiltins, &BuiltinModel::name)));
}

}  // namespace refit::models
