// vLLM's parameters (names as its model classes register them; docs/frameworks.md, "Storage"):
//   model.embed_tokens.weight, lm_head.weight     vocab padded to 64, split evenly over tp
//   model.layers.<L>.self_attn.qkv_proj.weight    [q shard; k shard; v shard]
//   model.layers.<L>.mlp.gate_up_proj.{weight,bias}  [gate shard; up shard]
//   model.layers.<L>.self_attn.fused_qkv_a_proj.weight  MLA: [q_a_proj; kv_a_proj_with_mqa]
//     (without a q LoRA rank: q_proj and kv_a_proj_with_mqa apart, under their HF names)
//   model.layers.<L>.mlp.experts.w13_weight       [E_local, 2*I_shard, H]: gate rows, then up rows
//   model.layers.<L>.mlp.experts.w2_weight        [E_local, H, I_shard]
// (stacked experts, or per-expert tensors at their slot, `linear` or `round_robin`; Mixtral:
// model.layers.<L>.block_sparse_moe.experts.w13_weight/w2_weight from w1, w3, w2)
//   model.layers.<M>.{enorm,hnorm,eh_proj,shared_head.norm}.weight, model.layers.<M>.mtp_block.*
// Every other tensor keeps its HF name, its shard row-major.
#include <fmt/format.h>

#include "quantized_storage.h"
#include "refit/core/try.h"
#include "refit/models/storage_map.h"
#include "refit/models/vllm_layout.h"
#include "storage_rules.h"

namespace refit::models {
namespace {

using detail::Stored;
using detail::TensorOnRank;

constexpr std::string_view kFramework = "vllm";
// FusedMoE's `prefix`experts.w13_weight [E_local, 2*I/tp, H] (gate rows first: FusedMoE._load_w13) and w2
// [E_local, H, I/tp] (UnquantizedFusedMoEMethod.create_weights).
Stored fused_experts(const TensorOnRank& t, const std::string& prefix, Projection p) {
  const bool w13 = p != Projection::kDown;
  const auto rows = w13 ? 2 * t.box.extent[1] : t.box.extent[1];
  Shape shape = t.box.extent;
  shape[1] = rows;
  return Stored{
      .parameters = {FrameworkParameter{.name = prefix + (w13 ? "experts.w13_weight" : "experts.w2_weight"),
                                        .shape = std::move(shape),
                                        .dtype = t.tensor->spec.dtype}},
      .regions = {detail::expert_rows(t, t.box.offset[0], t.box.offset[0] + t.box.extent[0], rows,
                                      p == Projection::kUp ? t.box.extent[1] : 0, 0)}};
}

// One expert's tensor (--per-expert) at its slot of the rank's w13/w2: with EP the slot is the
// expert's index among the rank's (determine_expert_map: e - first for linear, e / EP for
// round_robin), without EP the expert itself. Rows of this rank: gate/up [I_shard, H], down
// [H, I_shard].
Stored fused_expert(const TensorOnRank& t, const std::string& prefix, const VllmConfig& c) {
  const auto& w = *t.tensor;
  const auto ep = c.ep();
  const auto local = w.routed_experts / ep;
  const auto slot = !c.expert_parallel                            ? w.expert
                    : c.placement == ExpertPlacement::kRoundRobin ? w.expert / ep
                                                                  : w.expert % local;
  const auto rows = t.box.extent[0];
  if (w.projection == Projection::kDown)
    return Stored{.parameters = {FrameworkParameter{.name = prefix + "experts.w2_weight",
                                                    .shape = {local, rows, t.box.extent[1]},
                                                    .dtype = w.spec.dtype}},
                  .regions = {detail::rows_at(t, t.box.offset[0], t.box.offset[0] + rows, slot * rows, 0)}};
  const auto at = slot * 2 * rows + (w.projection == Projection::kUp ? rows : 0);
  return Stored{.parameters = {FrameworkParameter{.name = prefix + "experts.w13_weight",
                                                  .shape = {local, 2 * rows, t.box.extent[1]},
                                                  .dtype = w.spec.dtype}},
                .regions = {detail::rows_at(t, t.box.offset[0], t.box.offset[0] + rows, at, 0)}};
}

// A decoder layer's tensor, by its HF name inside the layer, as a parameter named `prefix` + the
// vLLM name inside the layer.
Result<Stored> layer_tensor(const TensorOnRank& t, const detail::LayerName& n, const std::string& prefix,
                            const VllmConfig& c) {
  const auto hf = fmt::format("model.layers.{}.", n.layer);
  const auto& r = n.rest;
  // QKVParallelLinear: [q; k; v] of this rank (a kv head replicated when tp exceeds them). MLA
  // has no k/v projections: its q_proj (no q LoRA) is a ColumnParallelLinear of its own.
  const bool gqa = t.model->num_kv_heads > 0;
  for (const std::string kind : {"weight", "bias"})
    if (gqa && (r == "self_attn.q_proj." + kind || r == "self_attn.k_proj." + kind ||
                r == "self_attn.v_proj." + kind))
      return detail::concatenated(t, prefix + "self_attn.qkv_proj." + kind,
                                  {hf + "self_attn.q_proj." + kind, hf + "self_attn.k_proj." + kind,
                                   hf + "self_attn.v_proj." + kind});
  // MergedColumnParallelLinear: [gate; up] of this rank, its bias (Llama's mlp_bias) likewise.
  for (const std::string mlp : {"mlp", "mlp.shared_experts"})
    for (const std::string kind : {"weight", "bias"})
      if (r == mlp + ".gate_proj." + kind || r == mlp + ".up_proj." + kind)
        return detail::concatenated(t, prefix + mlp + ".gate_up_proj." + kind,
                                    {hf + mlp + ".gate_proj." + kind, hf + mlp + ".up_proj." + kind});
  // FusedMoE under the MoE module of the checkpoint (mlp, or Mixtral's block_sparse_moe:
  // MixtralMoE.experts, loaded from w1/w3/w2 by FusedMoE.make_expert_params_mapping).
  if (t.tensor->is_routed_expert()) {
    const auto module = prefix + r.substr(0, r.find(".experts.") + 1);
    return t.tensor->is_stacked() ? fused_experts(t, module, t.tensor->projection)
                                  : fused_expert(t, module, c);
  }
  // DeepseekV2MLAAttention with a q LoRA rank: fused_qkv_a_proj [q_a_proj; kv_a_proj_with_mqa],
  // replicated (MergedColumnParallelLinear with disable_tp); without one kv_a_proj_with_mqa alone.
  if ((r == "self_attn.q_a_proj.weight" || r == "self_attn.kv_a_proj_with_mqa.weight") &&
      t.names->contains(hf + "self_attn.q_a_proj.weight"))
    return detail::concatenated(
        t, prefix + "self_attn.fused_qkv_a_proj.weight",
        {hf + "self_attn.q_a_proj.weight", hf + "self_attn.kv_a_proj_with_mqa.weight"});
  return detail::whole(t, prefix + r, t.box.extent[0]);
}

// follows vllm.model_executor.models.deepseek_mtp (DeepSeekMultiTokenPredictorLayer and
// DeepSeekMTP._rewrite_spec_layer_name): the MTP layer's own weights keep their HF names (enorm,
// hnorm, eh_proj, shared_head.norm), its decoder layer is the module mtp_block.
Result<Stored> mtp_tensor(const TensorOnRank& t, const detail::LayerName& n, const VllmConfig& c) {
  for (const std::string_view own :
       {"enorm.weight", "hnorm.weight", "eh_proj.weight", "shared_head.norm.weight"})
    if (n.rest == own) return detail::whole(t, t.tensor->spec.name, t.box.extent[0]);
  return layer_tensor(t, n, fmt::format("model.layers.{}.mtp_block.", n.layer), c);
}

Result<Stored> vllm_rule(const TensorOnRank& t, const VllmConfig& c) {
  const auto& name = t.tensor->spec.name;
  if (name == "model.embed_tokens.weight" || name == "lm_head.weight")
    return detail::padded_vocab(t, name, REFIT_TRY(vllm_vocab_rows(t.tensor->spec.shape[0], c.tp)));
  if (name == "model.norm.weight") return detail::whole(t, name, t.box.extent[0]);
  const auto n = detail::layer_name(name);
  if (!n || n->layer >= t.model->num_layers + t.model->mtp_layers) return detail::no_rule(kFramework, t);
  if (n->layer >= t.model->num_layers) return mtp_tensor(t, *n, c);
  return layer_tensor(t, *n, fmt::format("model.layers.{}.", n->layer), c);
}

}  // namespace

Result<StorageMap> vllm_storage(const ModelSpec& model, const VllmConfig& infer,
                                const ReshardProblem& problem) {
  return detail::build_storage(
      std::string(kFramework), model, problem, false,
      [&](const TensorOnRank& t) { return vllm_rule(t, infer); }, detail::vllm_scale_parameter);
}

}  // namespace refit::models
