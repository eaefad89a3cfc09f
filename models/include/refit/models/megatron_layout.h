#pragma once
// Where Megatron-Core keeps each weight during training (docs/frameworks.md): a Layout over
// the training ranks 0..world-1, in Megatron's default rank order "tp-cp-ep-dp-pp".
#include <cstdint>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/layout.h"
#include "refit/models/megatron_pipeline.h"
#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"

namespace refit::models {

// Rows per TP rank of Megatron's vocab-parallel weights (embedding, output layer): the vocab
// padded to a multiple of make_vocab_size_divisible_by * tp
// (megatron.training.vocab_utils.calculate_padded_vocab_size), split evenly
// (tensor_parallel.utils.VocabUtility.vocab_range_from_global_vocab_size). Rank i holds the real
// rows [i*rows, min((i+1)*rows, vocab)), padding after them. Unpadded (vocab_divisible_by 0, as
// Megatron-Bridge without should_pad_vocab), the split's divide() needs tp to divide the vocab:
// refused otherwise, naming both.
[[nodiscard]] Result<std::int64_t> megatron_vocab_rows(std::int64_t vocab, const MegatronConfig& config);

// Megatron's layouts for one model; checks at construction that the sizes fit it: tp divides
// the query heads, and the kv heads (whole query groups per rank) or, beyond them, is a multiple
// of them that divides linear_qkv's rows; ep divides the experts, tp and etp divide every dim they
// split but the vocab (split by megatron_vocab_rows), and the pipeline fits the layers
// (megatron_pipeline).
class MegatronLayouts {
 public:
  [[nodiscard]] static Result<MegatronLayouts> make(const ModelSpec& model, const MegatronConfig& config);

  // Precondition: `tensor` belongs to the model given to make().
  [[nodiscard]] Result<Layout> layout(const WeightTensor& tensor) const;
  std::int64_t stage_of(const WeightTensor& tensor) const;

 private:
  MegatronLayouts(MegatronConfig config, MegatronPipeline pipeline,
                  std::vector<std::int64_t> embedding_stages, std::int64_t layers, std::int64_t heads,
                  std::int64_t kv_heads)
      : config_(std::move(config)),
        pipeline_(std::move(pipeline)),
        embedding_stages_(std::move(embedding_stages)),
        num_layers_(layers),
        heads_(heads),
        kv_heads_(kv_heads) {}
  [[nodiscard]] Result<Layout> query_group_layout(const WeightTensor& tensor, std::int64_t stage) const;
  [[nodiscard]] Result<Layout> dense_layout(const WeightTensor& tensor, std::int64_t stage) const;
  [[nodiscard]] Result<Layout> expert_layout(const WeightTensor& tensor, std::int64_t stage) const;

  MegatronConfig config_;
  MegatronPipeline pipeline_;
  std::vector<std::int64_t> embedding_stages_;  // stages holding a copy of the word embedding
  std::int64_t num_layers_ = 0;                 // decoder layers; MTP layers follow them
  std::int64_t heads_ = 0;                      // query heads
  std::int64_t kv_heads_ = 0;                   // query groups; 0 for MLA
};

}  // namespace refit::models
