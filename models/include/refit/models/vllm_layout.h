#pragma once
// Where vLLM keeps each weight for inference (docs/frameworks.md): a Layout over the
// inference ranks first_rank..first_rank+world-1, rank = first_rank + tp_rank + TP*(dp_rank +
// DP*engine).
#include <cstdint>

#include "refit/core/error.h"
#include "refit/core/layout.h"
#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"

namespace refit::models {

// Rows per TP rank of vLLM's vocab-parallel weights (embed_tokens, lm_head): the vocab padded to
// a multiple of 64 (vocab_parallel_embedding.pad_vocab_size, DEFAULT_VOCAB_PADDING_SIZE), split
// evenly (VocabParallelEmbedding.__init__, whose divide() refuses a tp that does not divide the
// padded vocab: so does this, naming both). Rank i holds the real rows [i*rows, min((i+1)*rows,
// vocab)), zero padding after them.
[[nodiscard]] Result<std::int64_t> vllm_vocab_rows(std::int64_t vocab, std::int64_t tp);

// vLLM's layouts for one model; checks at construction that tp divides the query heads, that
// kv heads and tp divide one another, that the expert-parallel size divides the experts, and
// that tp (tp*dp for routed experts without EP) divides every other dim it splits but the vocab
// (split by vllm_vocab_rows).
class VllmLayouts {
 public:
  [[nodiscard]] static Result<VllmLayouts> make(const ModelSpec& model, const VllmConfig& config,
                                                std::int32_t first_rank);

  // Precondition: `tensor` belongs to the model given to make().
  [[nodiscard]] Result<Layout> layout(const WeightTensor& tensor) const;

 private:
  VllmLayouts(VllmConfig config, std::int64_t kv_heads, std::int32_t first_rank)
      : config_(config), kv_heads_(kv_heads), first_rank_(first_rank) {}
  [[nodiscard]] Result<Layout> expert_parallel_layout(const WeightTensor& tensor) const;

  VllmConfig config_;
  std::int64_t kv_heads_ = 0;
  std::int32_t first_rank_ = 0;
};

}  // namespace refit::models
