// Megatron-Core's parameters as a GPT model with the Transformer Engine layer spec holds them
// (names as Megatron-Bridge maps them to HF names; docs/frameworks.md, "Storage"):
//   embedding.word_embeddings.weight, output_layer.weight   vocab padded to 128*tp, split evenly
//   decoder.layers.<l>.self_attention.linear_qkv.weight      per query group [q heads; k; v]
//   decoder.layers.<l>.mlp.linear_fc1.{weight,bias}          [gate shard; up shard]
//   decoder.layers.<l>.mlp.experts.linear_fc1.weight<i>      TEGroupedMLP, one per local expert,
//                                                            [gate; up] or GLU-interleaved blocks
//   mtp.layers.<k>.{enorm,hnorm,eh_proj,final_layernorm}.weight, mtp.layers.<k>.mtp_model_layer.*
// with <l> the layer's number inside its model chunk and <i> the expert's inside its EP rank.
// With virtual pipeline stages a rank holds several chunks, model[0..vp-1], whose parameters are
// prefixed model<v>. as the checkpoint's state dict keys them (Megatron's generate_state_dict:
// key f'model{i}' when len(model) > 1; docs/frameworks.md, "Pipeline placement").
// A weight trained in fp8 (Transformer Engine's fp8 parameters) keeps its fp8 values where the
// bf16 would lie and its scales in <name>._rowwise_scale_inv (quantized_storage.h).
#include <optional>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "quantized_storage.h"
#include "refit/core/try.h"
#include "refit/models/megatron_layout.h"
#include "refit/models/megatron_pipeline.h"
#include "refit/models/storage_map.h"
#include "storage_rules.h"

namespace refit::models {
namespace {

using detail::Stored;
using detail::TensorOnRank;

constexpr std::string_view kFramework = "megatron";

// Megatron's linear_qkv holds, per query group, the group's q heads, then its k head, then its
// v head (SelfAttention.get_query_key_value_tensors: [sq, b, ng * (np/ng + 2) * hn];
// docs/frameworks.md), and TP ranks take equal slices of those rows: whole groups, or beyond the
// query groups part of one, which may hold q rows then k and v rows, or part of a head
// (query_group_layout in megatron_layout.cc). `member` is 0, 1, 2 for q, k, v. Each run of the
// box's rows inside one group is one region, at its row in the interleaved weight less the first
// row of the rank's slice.
Result<Stored> interleaved_qkv(const TensorOnRank& t, std::string name, int member, const MegatronConfig& c) {
  const auto& m = *t.model;
  const auto per_group = m.num_heads / m.num_kv_heads;
  const auto head_dim = t.tensor->spec.shape[0] / (member == 0 ? m.num_heads : m.num_kv_heads);
  const auto member_rows = (member == 0 ? per_group : 1) * head_dim;  // of one group
  const auto group_rows = (per_group + 2) * head_dim;
  const auto slice = m.num_kv_heads * group_rows / c.tp;  // rows of linear_qkv on each rank
  const auto at = member == 0 ? 0 : (per_group + member - 1) * head_dim;
  // Row x of this member, in the interleaved weight.
  const auto fused = [&](std::int64_t x) { return x / member_rows * group_rows + at + x % member_rows; };
  const auto begin = t.box.offset[0];
  const auto end = begin + t.box.extent[0];
  const auto first = fused(begin) / slice * slice;
  Stored out{
      .parameters = {FrameworkParameter{
          .name = std::move(name), .shape = detail::rows_shape(t.box, slice), .dtype = t.tensor->spec.dtype}},
      .regions = {}};
  for (auto x = begin; x < end;) {
    const auto next = std::min(end, (x / member_rows + 1) * member_rows);
    if (fused(next - 1) - first >= slice)
      return unsupported(
          fmt::format("rows [{}, {}) do not lie in one rank's {} rows of linear_qkv", begin, end, slice));
    out.regions.push_back(detail::rows_at(t, x, next, fused(x) - first, 0));
    x = next;
  }
  return out;
}

// Where one projection's `rows` rows of an expert's shard lie in linear_fc1<i> (2*rows rows):
// blocks of (first row in the shard, rows, row in the parameter). Gate rows then up rows, or, with
// moe_mlp_glu_interleave_size = s (glu_interleave), blocks of s gate rows and s up rows taking
// turns: [g 0..s-1; u 0..s-1; g s..2s-1; ...] (docs/frameworks.md, "Experts").
struct RowBlock {
  std::int64_t first = 0;
  std::int64_t rows = 0;
  std::int64_t at = 0;
};

Result<std::vector<RowBlock>> fc1_blocks(const TensorOnRank& t, std::int64_t rows, bool up,
                                         const MegatronConfig& c) {
  const auto s = c.glu_interleave;
  if (s == 0) return std::vector<RowBlock>{{.first = 0, .rows = rows, .at = up ? rows : 0}};
  // fp8 values and 128x128 block scales of interleaved rows are not checked against Megatron yet.
  if (t.problem->tensors()[t.index].tensor.quantization)
    return unsupported(fmt::format("glu_interleave={} with fp8 quantization (--quantize): not modelled", s));
  // rows % s == 0: build_problem refused any other glu_interleave.
  std::vector<RowBlock> out;
  for (std::int64_t b = 0; b < rows / s; ++b)
    out.push_back({.first = b * s, .rows = s, .at = 2 * b * s + (up ? s : 0)});
  return out;
}

// TEGroupedMLP registers one parameter per local expert, weight0..weight<E_local-1> (through
// TEGroupedLinear; docs/frameworks.md, "Experts"): fc1 [2*I/etp, H] holds gate and up rows
// (fc1_blocks), fc2 [H, I/etp].
Result<Stored> grouped_experts(const TensorOnRank& t, const std::string& prefix, const MegatronConfig& c) {
  const auto p = t.tensor->projection;
  const bool fc1 = p != Projection::kDown;
  const auto rows = fc1 ? 2 * t.box.extent[1] : t.box.extent[1];
  const auto blocks = fc1 ? REFIT_TRY(fc1_blocks(t, t.box.extent[1], p == Projection::kUp, c))
                          : std::vector<RowBlock>{{.first = 0, .rows = rows, .at = 0}};
  Shape shape(t.box.extent.begin() + 1, t.box.extent.end());
  shape[0] = rows;
  Stored out;
  for (std::int64_t i = 0; i < t.box.extent[0]; ++i) {
    out.parameters.push_back(
        FrameworkParameter{.name = fmt::format("{}mlp.experts.linear_fc{}.weight{}", prefix, fc1 ? 1 : 2, i),
                           .shape = shape,
                           .dtype = t.tensor->spec.dtype});
    const auto e = t.box.offset[0] + i;
    for (const auto& block : blocks) {
      TensorOnRank part = t;  // the block's rows of dim 1
      part.box.offset[1] += block.first;
      part.box.extent[1] = block.rows;
      out.regions.push_back(
          detail::expert_rows(part, e, e + 1, rows, block.at, static_cast<std::int32_t>(i)));
    }
  }
  return out;
}

// One expert's tensor (--per-expert) as TEGroupedMLP's parameter of its local index: experts
// ep_rank*E/EP onwards are local 0, 1, ... (BaseMoELayer.__init__; docs/frameworks.md, "Experts").
Result<Stored> grouped_expert(const TensorOnRank& t, const std::string& prefix, const MegatronConfig& c) {
  const auto& w = *t.tensor;
  const auto local = w.expert % (w.routed_experts / c.ep);
  const bool fc1 = w.projection != Projection::kDown;
  const auto rows = t.box.extent[0];
  const auto blocks = fc1 ? REFIT_TRY(fc1_blocks(t, rows, w.projection == Projection::kUp, c))
                          : std::vector<RowBlock>{{.first = 0, .rows = rows, .at = 0}};
  Stored out{.parameters = {FrameworkParameter{
                 .name = fmt::format("{}mlp.experts.linear_fc{}.weight{}", prefix, fc1 ? 1 : 2, local),
                 .shape = detail::rows_shape(t.box, fc1 ? 2 * rows : rows),
                 .dtype = w.spec.dtype}},
             .regions = {}};
  const auto begin = t.box.offset[0];
  for (const auto& block : blocks)
    out.regions.push_back(
        detail::rows_at(t, begin + block.first, begin + block.first + block.rows, block.at, 0));
  return out;
}

// The Megatron name of a decoder-layer weight it keeps whole, by its HF name inside the layer
// (Megatron-Bridge's AutoMapping entries for Qwen3, Qwen3-MoE and DeepSeek; docs/frameworks.md,
// "Storage: the frameworks' own parameters"). Norms fused into the next projection (TE) differ
// between dense and MoE layers and between GQA and MLA (`latent`).
std::optional<std::string> renamed(const std::string& r, bool moe, bool latent) {
  static constexpr std::pair<std::string_view, std::string_view> kNames[] = {
      {"self_attn.q_norm.weight", "self_attention.q_layernorm.weight"},
      {"self_attn.k_norm.weight", "self_attention.k_layernorm.weight"},
      {"self_attn.o_proj.weight", "self_attention.linear_proj.weight"},
      {"self_attn.o_proj.bias", "self_attention.linear_proj.bias"},  // Llama's attention_bias
      {"mlp.gate.weight", "mlp.router.weight"},
      {"block_sparse_moe.gate.weight", "mlp.router.weight"},  // Mixtral (MixtralBridge)
      // TopKRouter registers it as a float32 buffer, saved with the weights (docs/frameworks.md).
      {"mlp.gate.e_score_correction_bias", "mlp.router.expert_bias"},
      {"self_attn.q_a_proj.weight", "self_attention.linear_q_down_proj.weight"},
      {"self_attn.q_a_layernorm.weight", "self_attention.linear_q_up_proj.layer_norm_weight"},
      {"self_attn.q_b_proj.weight", "self_attention.linear_q_up_proj.weight"},
      {"self_attn.kv_a_proj_with_mqa.weight", "self_attention.linear_kv_down_proj.weight"},
      {"self_attn.kv_a_layernorm.weight", "self_attention.linear_kv_up_proj.layer_norm_weight"},
      {"self_attn.kv_b_proj.weight", "self_attention.linear_kv_up_proj.weight"},
  };
  if (r == "input_layernorm.weight")
    return latent ? "input_layernorm.weight" : "self_attention.linear_qkv.layer_norm_weight";
  if (r == "post_attention_layernorm.weight")
    return moe ? "pre_mlp_layernorm.weight" : "mlp.linear_fc1.layer_norm_weight";
  if (latent && r == "self_attn.q_proj.weight") return "self_attention.linear_q_proj.weight";
  for (const auto& [hf, megatron] : kNames)
    if (r == hf) return std::string(megatron);
  return std::nullopt;
}

// The parameter of a decoder-layer tensor, by its HF name inside the layer.
Result<Stored> layer_tensor(const TensorOnRank& t, const detail::LayerName& n, const std::string& prefix,
                            const MegatronConfig& c) {
  const auto hf = fmt::format("model.layers.{}.", n.layer);
  const auto& r = n.rest;
  const bool moe =
      t.names->contains(hf + "mlp.gate.weight") || t.names->contains(hf + "block_sparse_moe.gate.weight");
  if (const auto name = renamed(r, moe, t.model->num_kv_heads == 0))
    return detail::whole(t, prefix + *name, t.box.extent[0]);
  for (const std::string kind : {"weight", "bias"})
    for (int member = 0; member < 3; ++member)
      if (r == fmt::format("self_attn.{}_proj.{}", "qkv"[member], kind))
        return interleaved_qkv(t, prefix + "self_attention.linear_qkv." + kind, member, c);
  // Biases (Llama's mlp_bias, Megatron's add_bias_linear) lie as their weights do.
  for (const std::string mlp : {"mlp", "mlp.shared_experts"})
    for (const std::string kind : {"weight", "bias"}) {
      if (r == mlp + ".gate_proj." + kind || r == mlp + ".up_proj." + kind)
        return detail::concatenated(t, prefix + mlp + ".linear_fc1." + kind,
                                    {hf + mlp + ".gate_proj." + kind, hf + mlp + ".up_proj." + kind});
      if (r == mlp + ".down_proj." + kind)
        return detail::whole(t, prefix + mlp + ".linear_fc2." + kind, t.box.extent[0]);
    }
  // Routed experts under any module name (Mixtral's block_sparse_moe.experts.<e>.w1/w3/w2 map to
  // the same TEGroupedMLP parameters: MixtralBridge's GatedMLPMapping; docs/frameworks.md).
  if (t.tensor->is_stacked()) return grouped_experts(t, prefix, c);
  if (t.tensor->is_routed_expert()) return grouped_expert(t, prefix, c);
  return detail::no_rule(kFramework, t);
}

// follows megatron.core.transformer.multi_token_prediction (MultiTokenPredictionBlock.layers,
// MultiTokenPredictionLayer): mtp.layers.<k> holds enorm, hnorm, eh_proj (a ColumnParallelLinear:
// the rank's rows), final_layernorm (HF shared_head.norm) and its decoder layer mtp_model_layer,
// named like a decoder layer's.
Result<Stored> mtp_tensor(const TensorOnRank& t, const detail::LayerName& n, const std::string& chunk,
                          const MegatronConfig& c) {
  const auto prefix = fmt::format("{}mtp.layers.{}.", chunk, n.layer - t.model->num_layers);
  static constexpr std::pair<std::string_view, std::string_view> kOwn[] = {
      {"enorm.weight", "enorm.weight"},
      {"hnorm.weight", "hnorm.weight"},
      {"eh_proj.weight", "eh_proj.weight"},
      {"shared_head.norm.weight", "final_layernorm.weight"},
  };
  for (const auto& [hf, megatron] : kOwn)
    if (n.rest == hf) return detail::whole(t, prefix + std::string(megatron), t.box.extent[0]);
  return layer_tensor(t, n, prefix + "mtp_model_layer.", c);
}

// "model<v>." for chunk `chunk` when a rank holds several, else nothing.
std::string chunk_prefix(const MegatronPipeline& p, std::int64_t chunk) {
  return p.vp > 1 ? fmt::format("model{}.", p.chunks[static_cast<std::size_t>(chunk)].virtual_stage) : "";
}

Result<Stored> megatron_rule(const TensorOnRank& t, const MegatronConfig& c, const MegatronPipeline& p) {
  const auto& name = t.tensor->spec.name;
  const auto vocab_rows = REFIT_TRY(megatron_vocab_rows(t.tensor->spec.shape[0], c));
  const auto last = static_cast<std::int64_t>(p.chunks.size()) - 1;
  if (name == "model.embed_tokens.weight") {
    const auto stage = t.rank.value / c.stage_size();
    const auto chunk = p.embedding_chunk(stage, t.model->tied_embeddings);
    // A tied model's copy on the output layer's chunk is that layer's weight
    // (LanguageModule.shared_embedding_or_output_weight; docs/frameworks.md).
    const bool output = chunk != 0 && p.chunks[static_cast<std::size_t>(chunk)].mtp_layers == 0;
    return detail::padded_vocab(
        t, chunk_prefix(p, chunk) + (output ? "output_layer.weight" : "embedding.word_embeddings.weight"),
        vocab_rows);
  }
  if (name == "lm_head.weight")
    return detail::padded_vocab(t, chunk_prefix(p, last) + "output_layer.weight", vocab_rows);
  if (name == "model.norm.weight")
    return detail::whole(t, chunk_prefix(p, p.norm_chunk) + "decoder.final_layernorm.weight",
                         t.box.extent[0]);
  const auto n = detail::layer_name(name);
  if (!n || n->layer >= t.model->num_layers + t.model->mtp_layers) return detail::no_rule(kFramework, t);
  if (n->layer >= t.model->num_layers) return mtp_tensor(t, *n, chunk_prefix(p, p.mtp_chunk), c);
  const auto chunk = p.chunk_of_layer(n->layer);
  const auto local = n->layer - p.chunks[static_cast<std::size_t>(chunk)].first_layer;
  return layer_tensor(t, *n, fmt::format("{}decoder.layers.{}.", chunk_prefix(p, chunk), local), c);
}

}  // namespace

Result<StorageMap> megatron_storage(const ModelSpec& model, const MegatronConfig& train,
                                    const ReshardProblem& problem) {
  const auto pipeline = REFIT_TRY(megatron_pipeline(model.num_layers, model.mtp_layers, train));
  return detail::build_storage(
      std::string(kFramework), model, problem, true,
      [&](const TensorOnRank& t) { return megatron_rule(t, train, pipeline); }, detail::te_scale_parameter);
}

}  // namespace refit::models
