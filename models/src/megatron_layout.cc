// Megatron-Core's layouts. Rank order "tp-cp-ep-dp-pp", fastest first:
//   dense weights:  rank = tp + TP*(cp + CP*(dp + DP*pp))
//   expert weights: rank = etp + ETP*(ep + EP*(edp + EDP*pp))
// so a stage is the block of stage_size() ranks starting at pp*stage_size(), and inside it a
// dense weight lies on a [DP*CP, TP] mesh and a stacked expert weight on an [EDP, EP, ETP] mesh.
#include "refit/models/megatron_layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "layout_rules.h"
#include "refit/core/try.h"

namespace refit::models {
namespace {

// Megatron's --make-vocab-size-divisible-by default (megatron/training/arguments.py).
constexpr std::int64_t kVocabDivisibleBy = 128;

// q_proj's weight or bias: with tp beyond the query groups it is laid out with k and v.
bool is_query(const WeightTensor& t) {
  return t.kind == TensorKind::kColumn &&
         (t.spec.name.ends_with("self_attn.q_proj.weight") || t.spec.name.ends_with("self_attn.q_proj.bias"));
}

// Megatron splits linear_qkv's rows evenly over TP (attention.py, SelfAttention: "When tp_size >
// num_kv_heads, we split 'q1 q2 k1 v1' over multiple ranks"). With r = tp/groups ranks per query
// group, each takes h = (q heads per group + 2)/r heads of it; refit needs h whole and dividing
// the group's q heads, so every rank holds only q heads (split evenly) or only k and/or v.
[[nodiscard]] Result<void> check_query_groups(const ModelSpec& m, const MegatronConfig& c) {
  if (m.num_kv_heads == 0 || m.num_kv_heads % c.tp == 0) return {};
  const auto per_group = m.num_heads / m.num_kv_heads;
  const auto r = c.tp / m.num_kv_heads;
  if (c.tp % m.num_kv_heads != 0 || (per_group + 2) % r != 0 || per_group % ((per_group + 2) / r) != 0)
    return mismatch(
        fmt::format("tp={} with {} query groups of {} q heads: each rank's part of linear_qkv must be "
                    "whole q heads (as many on each) or k/v heads",
                    c.tp, m.num_kv_heads, per_group));
  return {};
}

[[nodiscard]] Result<void> check_sizes(const ModelSpec& m, const MegatronConfig& c) {
  REFIT_TRY(check_divides(c.tp, "tp", m.num_heads, "num_attention_heads"));
  REFIT_TRY(check_query_groups(m, c));
  const bool grouped = m.num_kv_heads > 0 && m.num_kv_heads % c.tp != 0;  // tp beyond the groups
  if (m.num_experts == 0 && c.ep > 1)
    return mismatch(fmt::format("ep={}: {} has no routed experts", c.ep, m.name));
  if (m.num_experts > 0) REFIT_TRY(check_divides(c.ep, "ep", m.num_experts, "the routed experts"));
  for (const auto& t : m.tensors) {
    // The vocab is padded and split by megatron_vocab_rows; q, k and v beyond the query groups
    // follow check_query_groups.
    if (t.kind == TensorKind::kVocab || (grouped && (is_query(t) || t.kind == TensorKind::kKeyValue)))
      continue;
    const bool expert = t.is_routed_expert();
    REFIT_TRY(check_even_split(t, tensor_parallel_dim(t), expert ? c.etp : c.tp, expert ? "etp" : "tp"));
  }
  return {};
}

}  // namespace

std::int64_t megatron_vocab_rows(std::int64_t vocab, std::int64_t tp) {
  const auto multiple = kVocabDivisibleBy * tp;
  return (vocab + multiple - 1) / multiple * multiple / tp;
}

Result<MegatronLayouts> MegatronLayouts::make(const ModelSpec& model, const MegatronConfig& config) {
  REFIT_TRY(check_sizes(model, config));
  auto pipeline = REFIT_TRY(megatron_pipeline(model.num_layers, model.mtp_layers, config));
  // The output layer (tied embeddings) and the MTP layers read the word embedding on their stages
  // (language_module.py, setup_embeddings_and_output_layer: "we also need to maintain duplicated
  // embedding weights in mtp process stage").
  std::vector<std::int64_t> embedding_stages;
  for (std::int64_t s = 0; s < config.pp; ++s)
    if (pipeline.embedding_chunk(s, model.tied_embeddings) >= 0) embedding_stages.push_back(s);
  return MegatronLayouts(config, std::move(pipeline), std::move(embedding_stages), model.num_layers,
                         model.num_heads, model.num_kv_heads);
}

// TP beyond the query groups (check_query_groups): rank j of a group's r ranks holds heads
// [j*h, (j+1)*h) of the group's [q heads; k; v]. So q lies on the group's first q/h ranks, split
// evenly, and k and v each on the one rank holding head q (k) or q + 1 (v): a [DP*CP, groups, n]
// mesh of those ranks, [R, S0, S0].
Result<Layout> MegatronLayouts::query_group_layout(const WeightTensor& tensor, std::int64_t stage) const {
  const auto& c = config_;
  const auto per_group = heads_ / kv_heads_;
  const auto r = c.tp / kv_heads_;
  const auto h = (per_group + 2) / r;
  const bool query = is_query(tensor);
  const bool value = !query && tensor.spec.name.find("v_proj") != std::string::npos;
  const auto first = query ? 0 : (per_group + (value ? 1 : 0)) / h;
  const auto n = query ? per_group / h : 1;
  std::vector<Rank> ranks;
  for (std::int64_t d = 0; d < c.dp * c.cp; ++d)
    for (std::int64_t g = 0; g < kv_heads_; ++g)
      for (std::int64_t j = first; j < first + n; ++j)
        ranks.emplace_back(static_cast<std::int32_t>(stage * c.stage_size() + d * c.tp + g * r + j));
  return make_layout(tensor, {c.dp * c.cp, kv_heads_, n}, std::move(ranks),
                     {Placement::replicate(), Placement::shard(0), Placement::shard(0)});
}

std::int64_t MegatronLayouts::stage_of(const WeightTensor& tensor) const {
  const auto& p = pipeline_;
  const auto chunk = [&](std::int64_t c) { return p.chunks[static_cast<std::size_t>(c)].stage; };
  if (tensor.section == Section::kEmbedding) return 0;
  if (tensor.layer >= num_layers_) return chunk(p.mtp_chunk);
  if (tensor.section == Section::kDecoder) return chunk(p.chunk_of_layer(tensor.layer));
  return tensor.kind == TensorKind::kVocab ? config_.pp - 1 : chunk(p.norm_chunk);  // lm_head, final norm
}

Result<Layout> MegatronLayouts::layout(const WeightTensor& tensor) const {
  const auto stage = stage_of(tensor);
  return tensor.is_routed_expert() ? expert_layout(tensor, stage) : dense_layout(tensor, stage);
}

Result<Layout> MegatronLayouts::dense_layout(const WeightTensor& tensor, std::int64_t stage) const {
  const auto& c = config_;
  if (kv_heads_ > 0 && kv_heads_ % c.tp != 0 && (is_query(tensor) || tensor.kind == TensorKind::kKeyValue))
    return query_group_layout(tensor, stage);
  // follows megatron.core.tensor_parallel.layers.VocabParallelEmbedding (and the output layer's
  // ColumnParallelLinear over the same padded vocab): rows in parts of megatron_vocab_rows.
  const auto tp = tensor.kind == TensorKind::kVocab
                      ? Placement::shard(0, megatron_vocab_rows(tensor.spec.shape[0], c.tp))
                      : shard_or_replicate(tensor_parallel_dim(tensor));
  // The stages of the output layer (tied) or the MTP layers keep their own copy of the embedding.
  if (tensor.section == Section::kEmbedding && embedding_stages_.size() > 1) {
    std::vector<Rank> ranks;
    for (const auto s : embedding_stages_) {
      const auto block = rank_block(s * c.stage_size(), c.stage_size());
      ranks.insert(ranks.end(), block.begin(), block.end());
    }
    return make_layout(tensor, {static_cast<std::int64_t>(embedding_stages_.size()), c.dp * c.cp, c.tp},
                       std::move(ranks), {Placement::replicate(), Placement::replicate(), tp});
  }
  return make_layout(tensor, {c.dp * c.cp, c.tp}, rank_block(stage * c.stage_size(), c.stage_size()),
                     {Placement::replicate(), tp});
}

Result<Layout> MegatronLayouts::expert_layout(const WeightTensor& tensor, std::int64_t stage) const {
  const auto& c = config_;
  const auto base = stage * c.stage_size();
  const auto etp = shard_or_replicate(tensor_parallel_dim(tensor));
  if (tensor.is_stacked())
    return make_layout(tensor, {c.edp(), c.ep, c.etp}, rank_block(base, c.stage_size()),
                       {Placement::replicate(), Placement::shard(0), etp});
  // Expert e lives on EP rank e / (E/EP), whole over its ETP group, replicated over EDP.
  const auto ep_rank = tensor.expert / (tensor.routed_experts / c.ep);
  std::vector<Rank> ranks;
  for (std::int64_t edp = 0; edp < c.edp(); ++edp)
    for (std::int64_t e = 0; e < c.etp; ++e)
      ranks.emplace_back(static_cast<std::int32_t>(base + e + c.etp * (ep_rank + c.ep * edp)));
  return make_layout(tensor, {c.edp(), c.etp}, std::move(ranks), {Placement::replicate(), etp});
}

}  // namespace refit::models
