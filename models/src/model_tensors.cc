// HfFields -> every weight tensor of the model, under the names HF checkpoints use.
#include <fmt/format.h>

#include "hf_fields.h"
#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit::models {
namespace {

class TensorBuilder {
 public:
  TensorBuilder(const HfFields& fields, const HfOptions& options)
      : f_(fields), per_expert_(options.per_expert) {}

  std::vector<WeightTensor> build() {
    section_ = Section::kEmbedding;
    add("model.embed_tokens.weight", {f_.vocab, f_.hidden}, TensorKind::kVocab);
    section_ = Section::kDecoder;
    for (std::int64_t i = 0; i < f_.layers; ++i) decoder_layer(i);
    section_ = Section::kHead;
    layer_ = -1;
    prefix_.clear();
    add("model.norm.weight", {f_.hidden}, TensorKind::kReplicated);
    if (!f_.tied_embeddings) add("lm_head.weight", {f_.vocab, f_.hidden}, TensorKind::kVocab);
    for (std::int64_t k = 0; k < f_.mtp_layers; ++k) mtp_layer(f_.layers + k);
    return std::move(out_);
  }

 private:
  WeightTensor& add(std::string_view name, Shape shape, TensorKind kind,
                    Projection projection = Projection::kNone) {
    out_.push_back(WeightTensor{
        .spec = TensorSpec{.name = prefix_ + std::string(name), .shape = std::move(shape), .dtype = f_.dtype},
        .kind = kind,
        .section = section_,
        .projection = projection,
        .layer = static_cast<std::int32_t>(layer_)});
    return out_.back();
  }

  void decoder_layer(std::int64_t i) {
    layer_ = i;
    prefix_ = fmt::format("model.layers.{}.", i);
    add("input_layernorm.weight", {f_.hidden}, TensorKind::kReplicated);
    f_.mla ? latent_attention(*f_.mla) : grouped_query_attention();
    add("post_attention_layernorm.weight", {f_.hidden}, TensorKind::kReplicated);
    const bool moe = f_.moe && f_.moe_layer[static_cast<std::size_t>(i)];
    moe ? mixture_of_experts(*f_.moe) : dense_mlp("mlp", f_.intermediate, f_.mlp_bias);
  }

  void grouped_query_attention() {
    const auto q = f_.heads * f_.head_dim;
    const auto kv = f_.kv_heads * f_.head_dim;
    add("self_attn.q_proj.weight", {q, f_.hidden}, TensorKind::kColumn);
    add("self_attn.k_proj.weight", {kv, f_.hidden}, TensorKind::kKeyValue);
    add("self_attn.v_proj.weight", {kv, f_.hidden}, TensorKind::kKeyValue);
    add("self_attn.o_proj.weight", {f_.hidden, q}, TensorKind::kRow);
    if (f_.qkv_bias) {
      add("self_attn.q_proj.bias", {q}, TensorKind::kColumn);
      add("self_attn.k_proj.bias", {kv}, TensorKind::kKeyValue);
      add("self_attn.v_proj.bias", {kv}, TensorKind::kKeyValue);
    }
    // A row-parallel bias is added once after the reduction, so every rank holds all of it.
    if (f_.o_bias) add("self_attn.o_proj.bias", {f_.hidden}, TensorKind::kReplicated);
    if (f_.qk_norm) {
      add("self_attn.q_norm.weight", {f_.head_dim}, TensorKind::kReplicated);
      add("self_attn.k_norm.weight", {f_.head_dim}, TensorKind::kReplicated);
    }
  }

  void latent_attention(const MlaFields& m) {
    const auto q_head = m.qk_nope_head_dim + m.qk_rope_head_dim;
    if (m.q_lora_rank) {
      add("self_attn.q_a_proj.weight", {*m.q_lora_rank, f_.hidden}, TensorKind::kReplicated);
      add("self_attn.q_a_layernorm.weight", {*m.q_lora_rank}, TensorKind::kReplicated);
      add("self_attn.q_b_proj.weight", {f_.heads * q_head, *m.q_lora_rank}, TensorKind::kColumn);
    } else {
      add("self_attn.q_proj.weight", {f_.heads * q_head, f_.hidden}, TensorKind::kColumn);
    }
    add("self_attn.kv_a_proj_with_mqa.weight", {m.kv_lora_rank + m.qk_rope_head_dim, f_.hidden},
        TensorKind::kReplicated);
    add("self_attn.kv_a_layernorm.weight", {m.kv_lora_rank}, TensorKind::kReplicated);
    add("self_attn.kv_b_proj.weight", {f_.heads * (m.qk_nope_head_dim + m.v_head_dim), m.kv_lora_rank},
        TensorKind::kColumn);
    add("self_attn.o_proj.weight", {f_.hidden, f_.heads * m.v_head_dim}, TensorKind::kRow);
  }

  void dense_mlp(std::string_view module, std::int64_t intermediate, bool bias) {
    const auto name = [&](std::string_view proj, std::string_view what) {
      return fmt::format("{}.{}.{}", module, proj, what);
    };
    add(name("gate_proj", "weight"), {intermediate, f_.hidden}, TensorKind::kColumn, Projection::kGate);
    add(name("up_proj", "weight"), {intermediate, f_.hidden}, TensorKind::kColumn, Projection::kUp);
    add(name("down_proj", "weight"), {f_.hidden, intermediate}, TensorKind::kRow, Projection::kDown);
    if (!bias) return;
    add(name("gate_proj", "bias"), {intermediate}, TensorKind::kColumn, Projection::kGate);
    add(name("up_proj", "bias"), {intermediate}, TensorKind::kColumn, Projection::kUp);
    add(name("down_proj", "bias"), {f_.hidden}, TensorKind::kReplicated, Projection::kDown);
  }

  void mixture_of_experts(const MoeFields& m) {
    add(fmt::format("{}.gate.weight", m.module), {m.num_experts, f_.hidden}, TensorKind::kReplicated);
    // fp32 whatever the weights' dtype, in both frameworks (docs/frameworks.md, "Storage"): vLLM's
    // DeepseekV2MoE and Megatron's TopKRouter expert_bias allocate it as float32.
    if (m.score_correction_bias)
      add(fmt::format("{}.gate.e_score_correction_bias", m.module), {m.num_experts}, TensorKind::kReplicated)
          .spec.dtype = DType::kFP32;
    if (per_expert_) {
      for (std::int64_t e = 0; e < m.num_experts; ++e) routed_experts(m, e);
    } else {
      routed_experts(m, kStackedExperts);
    }
    if (m.shared_intermediate > 0) dense_mlp("mlp.shared_experts", m.shared_intermediate, false);
  }

  // One expert's gate/up/down under its HF name, or all experts stacked as [E, out, in].
  void routed_experts(const MoeFields& m, std::int64_t expert) {
    const bool stacked = expert == kStackedExperts;
    const auto name = [&](std::size_t p) {
      return stacked ? fmt::format("{}.experts.{}", m.module, m.names[p])
                     : fmt::format("{}.experts.{}.{}.weight", m.module, expert, m.names[p]);
    };
    const auto shape = [&](std::int64_t out, std::int64_t in) {
      return stacked ? Shape{m.num_experts, out, in} : Shape{out, in};
    };
    const auto mark = [&](WeightTensor& t) {
      t.routed_experts = static_cast<std::int32_t>(m.num_experts);
      t.expert = static_cast<std::int32_t>(expert);
    };
    mark(add(name(0), shape(m.intermediate, f_.hidden), TensorKind::kColumn, Projection::kGate));
    mark(add(name(1), shape(m.intermediate, f_.hidden), TensorKind::kColumn, Projection::kUp));
    mark(add(name(2), shape(f_.hidden, m.intermediate), TensorKind::kRow, Projection::kDown));
  }

  // DeepSeek-V3's multi-token-prediction layer: norms, a projection of [embedding; hidden
  // state], then a full decoder layer; it lives on the last pipeline stage. Its embedding and
  // output head are the main model's in both frameworks, so they are not tensors of their own
  // (the checkpoint's copies, model.layers.<i>.embed_tokens and shared_head.head, are never
  // loaded): Megatron's MultiTokenPredictionLayer is handed GPTModel's embedding and
  // output_layer, and vLLM's EagleProposer.load_model replaces the MTP drafter's embed_tokens
  // and lm_head by the target model's ("Detected MTP model. Sharing target model ...").
  void mtp_layer(std::int64_t i) {
    layer_ = i;
    prefix_ = fmt::format("model.layers.{}.", i);
    add("enorm.weight", {f_.hidden}, TensorKind::kReplicated);
    add("hnorm.weight", {f_.hidden}, TensorKind::kReplicated);
    add("eh_proj.weight", {f_.hidden, 2 * f_.hidden}, TensorKind::kMtpProjection);
    add("shared_head.norm.weight", {f_.hidden}, TensorKind::kReplicated);
    decoder_layer(i);
  }

  const HfFields& f_;
  bool per_expert_ = false;
  Section section_ = Section::kEmbedding;
  std::int64_t layer_ = -1;
  std::string prefix_;
  std::vector<WeightTensor> out_;
};

}  // namespace

namespace {

// Tensors of one layer besides its routed experts (attention, norms, dense or shared MLP, gate).
constexpr std::int64_t kLayerTensors = 16;

[[nodiscard]] Result<void> check_tensor_count(const HfFields& f, const HfOptions& options) {
  const auto experts = f.moe && options.per_expert ? 3 * f.moe->num_experts : 3;
  const auto per_layer = REFIT_TRY(checked_add(kLayerTensors, experts, limits::kMaxTensors,
                                               "tensors per layer (3 per routed expert with --per-expert)"));
  REFIT_TRY(checked_mul(f.layers + f.mtp_layers, per_layer, limits::kMaxTensors,
                        "tensors: layers (num_hidden_layers and MTP layers) x tensors per layer"));
  return {};
}

[[nodiscard]] Result<void> check_sizes(const std::vector<WeightTensor>& tensors) {
  std::int64_t total = 0;
  for (const auto& t : tensors) {
    const auto where = fmt::format("tensor '{}'", t.spec.name);
    const auto elements =
        REFIT_TRY_IN(checked_product(t.spec.shape, limits::kMaxElements, "elements"), where);
    const auto bytes =
        REFIT_TRY_IN(checked_mul(elements, dtype_size(t.spec.dtype), limits::kMaxBytes, "bytes"), where);
    total = REFIT_TRY_IN(checked_add(total, bytes, limits::kMaxBytes, "the model's bytes"), where);
  }
  return {};
}

}  // namespace

Result<ModelSpec> make_model_spec(const HfFields& fields, const HfOptions& options, std::string name) {
  REFIT_TRY(check_tensor_count(fields, options));
  ModelSpec spec;
  spec.name = std::move(name);
  spec.architecture = fields.architecture;
  spec.dtype = fields.dtype;
  spec.num_layers = fields.layers;
  spec.num_heads = fields.heads;
  spec.num_kv_heads = fields.mla ? 0 : fields.kv_heads;
  spec.num_experts = fields.moe ? fields.moe->num_experts : 0;
  spec.expert_groups = fields.moe ? fields.moe->expert_groups : 1;
  spec.mtp_layers = fields.mtp_layers;
  spec.tied_embeddings = fields.tied_embeddings;
  spec.tensors = TensorBuilder(fields, options).build();
  REFIT_TRY(check_sizes(spec.tensors));
  return spec;
}

}  // namespace refit::models
