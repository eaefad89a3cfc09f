// vLLM's layouts: each DP rank of each engine is one TP group of consecutive ranks, so a dense
// weight lies on an [ENGINES*DP, TP] mesh of the inference ranks. The MoE layer of an engine
// spans its TP*DP ranks (FusedMoEParallelConfig.make): with expert parallelism they split the
// routed experts, without it they split each expert's intermediate dim (the MoE TP flattened
// over DP); engines hold copies.
#include "refit/models/vllm_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "layout_rules.h"
#include "refit/core/try.h"

namespace refit::models {
namespace {

// vLLM's DEFAULT_VOCAB_PADDING_SIZE (docs/frameworks.md, vLLM vocab padding).
constexpr std::int64_t kVocabPadding = 64;

// With EP, tp > 1, dp > 1 and an all2all backend that supports it, vLLM runs MoE layers
// sequence-parallel and builds the shared experts without TP (ParallelConfig.
// use_sequence_parallel_moe; DeepseekV2MoE passes it to DeepseekV2MLP as disable_tp), so every
// rank holds them whole; on the other backends they stay TP-sharded like a dense MLP.
bool replicated_shared_expert(const WeightTensor& t, const VllmConfig& c) {
  const auto backends = all2all_backends();
  const auto backend = std::ranges::find(backends, c.all2all, &All2AllBackend::name);
  return c.expert_parallel && c.tp > 1 && c.dp > 1 && backend != backends.end() &&
         backend->sequence_parallel_moe && t.spec.name.find(".mlp.shared_experts.") != std::string::npos;
}

// The tensor dim TP splits in vLLM: the MTP eh_proj is a plain (replicated) nn.Linear there,
// routed experts are not TP-split under expert parallelism, nor shared experts under
// sequence-parallel MoE.
std::optional<int> vllm_tp_dim(const WeightTensor& t, const VllmConfig& c) {
  if (t.kind == TensorKind::kMtpProjection || replicated_shared_expert(t, c)) return std::nullopt;
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
    if (t.kind == TensorKind::kVocab) REFIT_TRY_IN(vllm_vocab_rows(t.spec.shape[0], c.tp), t.spec.name);
    // kv heads follow the rule checked above.
    if (t.kind == TensorKind::kVocab || t.kind == TensorKind::kKeyValue) continue;
    const bool moe_tp = t.is_routed_expert() && c.dp > 1;  // the MoE TP flattened over DP
    REFIT_TRY(
        check_even_split(t, vllm_tp_dim(t, c), moe_tp ? c.engine_size() : c.tp, moe_tp ? "tp*dp" : "tp"));
  }
  return {};
}

}  // namespace

Result<std::int64_t> vllm_vocab_rows(std::int64_t vocab, std::int64_t tp) {
  const auto padded = (vocab + kVocabPadding - 1) / kVocabPadding * kVocabPadding;
  if (padded % tp != 0)
    return mismatch(fmt::format("tp={} does not divide the vocab of {} padded to {} (a multiple of {})", tp,
                                vocab, padded, kVocabPadding));
  return padded / tp;
}

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
  // follows vllm VocabParallelEmbedding / ParallelLMHead: rows in parts of vllm_vocab_rows.
  if (tensor.kind == TensorKind::kVocab)
    return make_layout(tensor, {c.engines * c.dp, c.tp}, std::move(ranks),
                       {Placement::replicate(),
                        Placement::shard(0, REFIT_TRY(vllm_vocab_rows(tensor.spec.shape[0], c.tp)))});
  // Without EP the MoE TP is flattened over the engine's DP ranks: tp_rank + TP*dp_rank
  // (FusedMoEParallelConfig.make, flatten_tp_across_dp), so an expert's intermediate dim is split
  // over the engine's tp*dp ranks.
  if (tensor.is_routed_expert())
    return make_layout(tensor, {c.engines, c.engine_size()}, std::move(ranks),
                       {Placement::replicate(), shard_or_replicate(dim)});
  // Fewer kv heads than TP ranks: the TP axis viewed as [kv_heads, tp/kv_heads], each kv head
  // replicated on tp/kv_heads consecutive ranks.
  if (tensor.kind == TensorKind::kKeyValue && kv_heads_ < c.tp)
    return make_layout(tensor, {c.engines * c.dp, kv_heads_, c.tp / kv_heads_}, std::move(ranks),
                       {Placement::replicate(), Placement::shard(0), Placement::replicate()});
  return make_layout(tensor, {c.engines * c.dp, c.tp}, std::move(ranks),
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
  const auto engines = config_.engines;
  if (tensor.is_stacked())
    return make_layout(tensor, {engines, ep}, rank_block(first_rank_, engines * ep),
                       {Placement::replicate(), Placement::shard(0)});
  // Expert e lives whole on EP rank e / (E/EP) (linear) or e % EP (round_robin) of every engine.
  const auto owner = round_robin ? tensor.expert % ep : tensor.expert / (tensor.routed_experts / ep);
  std::vector<Rank> ranks;
  for (std::int64_t e = 0; e < engines; ++e)
    ranks.emplace_back(static_cast<std::int32_t>(first_rank_ + e * ep + owner));
  return make_layout(tensor, {engines}, std::move(ranks), {Placement::replicate()});
}

}  // namespace refit::models
