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

// q_proj's weight or bias: with tp beyond the query groups it is laid out with k and v.
bool is_query(const WeightTensor& t) {
  return t.kind == TensorKind::kColumn &&
         (t.spec.name.ends_with("self_attn.q_proj.weight") || t.spec.name.ends_with("self_attn.q_proj.bias"));
}

// The tensor dim Megatron's TP splits: as tensor_parallel_dim, but the local layer spec builds
// MLA's down projections (q_a_proj, kv_a_proj_with_mqa) column-parallel where the TE spec
// replicates them (get_gpt_layer_local_spec; docs/frameworks.md, "Tensor-parallel placements").
std::optional<int> megatron_tp_dim(const WeightTensor& t, const MegatronConfig& c) {
  const bool down = t.spec.name.ends_with("self_attn.q_a_proj.weight") ||
                    t.spec.name.ends_with("self_attn.kv_a_proj_with_mqa.weight");
  return c.local_spec && down ? std::optional<int>(0) : tensor_parallel_dim(t);
}

// Beyond the query groups Megatron needs tp to be a multiple of them (TransformerConfig.
// __post_init__: "num_query_groups ... must be a multiple or divisor of tensor_model_parallel_size").
[[nodiscard]] Result<void> check_query_groups(const ModelSpec& m, const MegatronConfig& c) {
  if (m.num_kv_heads == 0 || m.num_kv_heads % c.tp == 0 || c.tp % m.num_kv_heads == 0) return {};
  return mismatch(
      fmt::format("--train tp={} and {} query groups (num_key_value_heads): Megatron needs one "
                  "to divide the other",
                  c.tp, m.num_kv_heads));
}

// Like any column-parallel linear, linear_qkv's rows must split evenly over tp (Megatron's
// ColumnParallelLinear: output_size_per_partition = divide(output_size, world_size);
// docs/frameworks.md, query groups and TP); beyond the query groups tp dividing the heads does
// not imply it. Those rows are (heads + 2*groups) heads of d rows, d read from `kv`, a k or v
// projection's weight or bias.
[[nodiscard]] Result<void> check_fused_qkv_rows(const ModelSpec& m, const MegatronConfig& c,
                                                const WeightTensor& kv) {
  const auto head_dim = kv.spec.shape[0] / m.num_kv_heads;
  const auto rows = (m.num_heads + 2 * m.num_kv_heads) * head_dim;
  if (rows % c.tp == 0) return {};
  return mismatch(
      fmt::format("{}: --train tp={} does not divide linear_qkv's {} rows ((num_attention_heads "
                  "{} + 2 * {} query groups) * head dim {}), which Megatron splits evenly",
                  kv.spec.name, c.tp, rows, m.num_heads, m.num_kv_heads, head_dim));
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
    // are cut where linear_qkv is (query_group_layout).
    if (grouped && t.kind == TensorKind::kKeyValue) REFIT_TRY(check_fused_qkv_rows(m, c, t));
    if (t.kind == TensorKind::kVocab) REFIT_TRY_IN(megatron_vocab_rows(t.spec.shape[0], c), t.spec.name);
    if (t.kind == TensorKind::kVocab || (grouped && (is_query(t) || t.kind == TensorKind::kKeyValue)))
      continue;
    const bool expert = t.is_routed_expert();
    REFIT_TRY(check_even_split(t, megatron_tp_dim(t, c), expert ? c.etp : c.tp, expert ? "etp" : "tp"));
  }
  return {};
}

}  // namespace

Result<std::int64_t> megatron_vocab_rows(std::int64_t vocab, const MegatronConfig& c) {
  if (c.vocab_divisible_by == 0) {
    if (vocab % c.tp != 0)
      return mismatch(
          fmt::format("tp={} does not divide the vocab of {} rows, which vocab_divisible_by=off "
                      "leaves unpadded (give vocab_divisible_by=N to pad it as Megatron-LM does)",
                      c.tp, vocab));
    return vocab / c.tp;
  }
  const auto multiple = c.vocab_divisible_by * c.tp;
  return (vocab + multiple - 1) / multiple * multiple / c.tp;
}

Result<MegatronLayouts> MegatronLayouts::make(const ModelSpec& model, const MegatronConfig& config) {
  REFIT_TRY(check_sizes(model, config));
  auto pipeline = REFIT_TRY(megatron_pipeline(model.num_layers, model.mtp_layers, config));
  // The output layer (tied embeddings) and the MTP layers read the word embedding on their stages
  // (setup_embeddings_and_output_layer: "we also need to maintain duplicated embedding weights in
  // mtp process stage"; docs/frameworks.md, "Pipeline placement").
  std::vector<std::int64_t> embedding_stages;
  for (std::int64_t s = 0; s < config.pp; ++s)
    if (pipeline.embedding_chunk(s, model.tied_embeddings) >= 0) embedding_stages.push_back(s);
  return MegatronLayouts(config, std::move(pipeline), std::move(embedding_stages), model.num_layers,
                         model.num_heads, model.num_kv_heads);
}

// TP beyond the query groups: the r = tp/groups ranks of a group take s = (n+2)*d/r rows each of
// its [n q heads; k; v] of d rows (check_fused_qkv_rows), so a rank may hold q and k rows, or part
// of a head. Over a [DP*CP, groups, r] mesh each group's q rows are cut at multiples of s (ranks
// past q's end hold none), and k's and v's on the same grid shifted back by the rows before them
// in the group, n*d and (n+1)*d: [R, S0, S0:s@-(n*d)] for k.
Result<Layout> MegatronLayouts::query_group_layout(const WeightTensor& tensor, std::int64_t stage) const {
  const auto& c = config_;
  const bool query = is_query(tensor);
  const auto head_dim = tensor.spec.shape[0] / (query ? heads_ : kv_heads_);
  const auto per_group = heads_ / kv_heads_;
  const auto r = c.tp / kv_heads_;
  const auto s = (per_group + 2) * head_dim / r;
  const bool value = !query && tensor.spec.name.find("v_proj") != std::string::npos;
  const auto before = query ? 0 : (per_group + (value ? 1 : 0)) * head_dim;
  return make_layout(tensor, {c.dp * c.cp, kv_heads_, r}, rank_block(stage * c.stage_size(), c.stage_size()),
                     {Placement::replicate(), Placement::shard(0), Placement::shard(0, s, -before)});
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
                      ? Placement::shard(0, REFIT_TRY(megatron_vocab_rows(tensor.spec.shape[0], c)))
                      : shard_or_replicate(megatron_tp_dim(tensor, c));
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
