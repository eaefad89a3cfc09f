// vLLM's layouts: each DP replica is one TP group of consecutive ranks, so a weight lies on a
// [DP, TP] mesh of the inference ranks; with expert parallelism the routed experts are split
// over all EP = TP*DP ranks instead.
#include "refit/models/vllm_layout.h"

#include <fmt/format.h>

#include "layout_rules.h"
#include "refit/core/try.h"

namespace refit::models {
namespace {

// The tensor dim TP splits in vLLM: the MTP eh_proj is a plain (replicated) nn.Linear there, and
// routed experts are not TP-split under expert parallelism.
std::optional<int> vllm_tp_dim(const WeightTensor& t, const VllmConfig& c) {
  if (t.kind == TensorKind::kMtpProjection) return std::nullopt;
  if (t.is_routed_expert() && c.expert_parallel) return std::nullopt;
  return tensor_parallel_dim(t);
}

[[nodiscard]] Result<void> check_heads(const ModelSpec& m, const VllmConfig& c) {
  REFIT_TRY(check_divides(c.tp, "tp", m.num_heads, "num_attention_heads"));
  const auto kv = m.num_kv_heads;  // kv heads fewer than tp are replicated, tp/kv ranks each
  if (kv > 0 && kv % c.tp != 0 && c.tp % kv != 0)
    return mismatch(fmt::format("tp={} and num_key_value_heads={}: one must divide the other", c.tp, kv));
  return {};
}

[[nodiscard]] Result<void> check_sizes(const ModelSpec& m, const VllmConfig& c) {
  REFIT_TRY(check_heads(m, c));
  if (c.expert_parallel && m.num_experts % c.ep() != 0)
    return mismatch(
        fmt::format("ep: the expert-parallel size tp*dp = {} does not divide the {} "
                    "routed experts",
                    c.ep(), m.num_experts));
  for (const auto& t : m.tensors) {
    // vLLM pads the vocab; kv heads follow the rule checked above.
    if (t.kind == TensorKind::kVocab || t.kind == TensorKind::kKeyValue) continue;
    REFIT_TRY(check_even_split(t, vllm_tp_dim(t, c), c.tp, "tp"));
  }
  return {};
}

}  // namespace

Result<VllmLayouts> VllmLayouts::make(const ModelSpec& model, const VllmConfig& config,
                                      std::int32_t first_rank) {
  REFIT_TRY(check_sizes(model, config));
  return VllmLayouts(config, model.num_kv_heads, first_rank);
}

Result<Layout> VllmLayouts::layout(const WeightTensor& tensor) const {
  const auto& c = config_;
  if (tensor.is_routed_expert() && c.expert_parallel) return expert_parallel_layout(tensor);
  auto ranks = rank_block(first_rank_, c.world());
  const auto dim = vllm_tp_dim(tensor, c);
  // Fewer kv heads than TP ranks: the TP axis viewed as [kv_heads, tp/kv_heads], each kv head
  // replicated on tp/kv_heads consecutive ranks.
  if (tensor.kind == TensorKind::kKeyValue && kv_heads_ < c.tp)
    return make_layout(tensor, {c.dp, kv_heads_, c.tp / kv_heads_}, std::move(ranks),
                       {Placement::replicate(), Placement::shard(0), Placement::replicate()});
  return make_layout(tensor, {c.dp, c.tp}, std::move(ranks),
                     {Placement::replicate(), shard_or_replicate(dim)});
}

Result<Layout> VllmLayouts::expert_parallel_layout(const WeightTensor& tensor) const {
  const auto ep = config_.ep();
  const bool round_robin = config_.placement == ExpertPlacement::kRoundRobin;
  if (tensor.is_stacked() && round_robin)
    return unsupported(
        fmt::format("{}: placement=round_robin puts every EP-th expert on a rank, which a "
                    "stacked [E, ...] tensor cannot say: use per-expert tensors (--per-expert)",
                    tensor.spec.name));
  if (tensor.is_stacked())
    return make_layout(tensor, {ep}, rank_block(first_rank_, ep), {Placement::shard(0)});
  // Expert e lives whole on EP rank e / (E/EP) (linear) or e % EP (round_robin).
  const auto owner =
      first_rank_ + (round_robin ? tensor.expert % ep : tensor.expert / (tensor.routed_experts / ep));
  return make_layout(tensor, {1}, rank_block(owner, 1), {Placement::replicate()});
}

}  // namespace refit::models
