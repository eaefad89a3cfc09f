#pragma once
// Where Megatron-Core keeps each weight during training (docs/frameworks.md): a Layout over
// the training ranks 0..world-1, in Megatron's default rank order "tp-cp-ep-dp-pp".
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/layout.h"
#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"

namespace refit::models {

// Rows per TP rank of Megatron's vocab-parallel weights (embedding, output layer): the vocab
// padded to a multiple of make_vocab_size_divisible_by (128) * tp
// (megatron.training.vocab_utils.calculate_padded_vocab_size), split
// evenly (tensor_parallel.utils.VocabUtility.vocab_range_from_global_vocab_size). Rank i holds
// the real rows [i*rows, min((i+1)*rows, vocab)), padding after them.
std::int64_t megatron_vocab_rows(std::int64_t vocab, std::int64_t tp);

// First decoder layer of each pipeline stage, plus num_layers at the end. Layers split evenly;
// when pp does not divide them, every stage but the last takes ceil(layers/pp) and the last the
// rest (Megatron-Bridge's DeepSeek-V3 PP16 layout: 15 x 4 + 1), unless pp_first/pp_last say
// how many the first/last stage take (the rest split evenly over the middle stages).
[[nodiscard]] Result<std::vector<std::int64_t>> megatron_stage_starts(std::int64_t num_layers,
                                                                      const MegatronConfig& config);

// Megatron's layouts for one model; checks at construction that the sizes fit it: tp divides
// the query heads, and the kv heads (whole query groups per rank) or, beyond them, each rank's
// part of linear_qkv is whole heads of one kind; ep divides the experts, tp and etp divide every
// dim they split but the vocab (split by megatron_vocab_rows), and every pipeline stage gets a
// layer.
class MegatronLayouts {
 public:
  [[nodiscard]] static Result<MegatronLayouts> make(const ModelSpec& model, const MegatronConfig& config);

  // Precondition: `tensor` belongs to the model given to make().
  [[nodiscard]] Result<Layout> layout(const WeightTensor& tensor) const;
  std::int64_t stage_of(const WeightTensor& tensor) const;

 private:
  MegatronLayouts(MegatronConfig config, std::vector<std::int64_t> stage_starts, bool last_embeds,
                  std::int64_t heads, std::int64_t kv_heads)
      : config_(config),
        stage_starts_(std::move(stage_starts)),
        last_stage_embedding_(last_embeds),
        heads_(heads),
        kv_heads_(kv_heads) {}
  [[nodiscard]] Result<Layout> query_group_layout(const WeightTensor& tensor, std::int64_t stage) const;
  [[nodiscard]] Result<Layout> dense_layout(const WeightTensor& tensor, std::int64_t stage) const;
  [[nodiscard]] Result<Layout> expert_layout(const WeightTensor& tensor, std::int64_t stage) const;

  MegatronConfig config_;
  std::vector<std::int64_t> stage_starts_;
  bool last_stage_embedding_ = false;  // the last stage keeps a copy of the word embedding
  std::int64_t heads_ = 0;             // query heads
  std::int64_t kv_heads_ = 0;          // query groups; 0 for MLA
};

}  // namespace refit::models
