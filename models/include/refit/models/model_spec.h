#pragma once
// A model as refit sees it: every weight tensor with its HF checkpoint name, shape and dtype, and
// the facts the framework layout rules need (how tensor parallelism splits it, which pipeline
// stage holds it, whether it is a routed expert).
//
// Naming: non-expert tensors keep their HF checkpoint names
// ("model.layers.3.self_attn.q_proj.weight"). Routed experts are stacked by default into one tensor
// per layer and projection, [E, out, in], named after the per-expert names without the expert index
// and without ".weight"
// ("model.layers.5.mlp.experts.gate_proj", Mixtral "model.layers.5.block_sparse_moe.experts.w1"),
// as grouped-GEMM kernels store them. With per_expert, each expert is its own tensor under its HF
// name ("model.layers.5.mlp.experts.17.gate_proj.weight").
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "refit/core/dtype.h"
#include "refit/core/tensor_spec.h"
#include "refit/core/units.h"

namespace refit::models {

// How tensor parallelism splits a weight; each framework's layout rules map a kind to placements.
enum class TensorKind : std::uint8_t {
  kReplicated,     // norms, routers, row-parallel biases, MLA q_a_proj / kv_a_proj_with_mqa
  kVocab,          // embed_tokens, lm_head: vocab-parallel, split along the vocab rows
  kColumn,         // q_proj, q_b_proj, kv_b_proj, gate/up (and their biases): split along out
  kKeyValue,       // k_proj, v_proj (and biases): split along out by kv head
  kRow,            // o_proj, down_proj: split along in
  kMtpProjection,  // DeepSeek MTP eh_proj: column-parallel in Megatron, a plain Linear in vLLM
};

// Which pipeline stage holds a tensor: the first, the stage of its decoder layer, or the last.
enum class Section : std::uint8_t { kEmbedding, kDecoder, kHead };

// The feed-forward projection a tensor belongs to (dense MLP, shared or routed experts), for the
// share of bytes in gate/up/down.
enum class Projection : std::uint8_t { kNone, kGate, kUp, kDown };

inline constexpr std::int32_t kStackedExperts = -1;

struct WeightTensor {
  TensorSpec spec;
  TensorKind kind = TensorKind::kReplicated;
  Section section = Section::kDecoder;
  Projection projection = Projection::kNone;
  std::int32_t layer = -1;                // decoder layer (MTP layers follow them); -1 outside layers
  std::int32_t routed_experts = 0;        // experts of the layer when a routed-expert weight, else 0
  std::int32_t expert = kStackedExperts;  // the expert of a per-expert tensor

  bool is_routed_expert() const { return routed_experts > 0; }
  bool is_stacked() const { return is_routed_expert() && expert == kStackedExperts; }
};

// The tensor dim that tensor parallelism splits (expert parallelism owns dim 0 of stacked
// experts, so their dims shift by one), or nothing for replicated weights.
std::optional<int> tensor_parallel_dim(const WeightTensor& t);

struct ModelSpec {
  std::string name;
  std::string architecture;  // llama, qwen2, qwen3, qwen3_moe, mixtral, deepseek_v3
  DType dtype = DType::kBF16;
  std::int64_t num_layers = 0;     // decoder layers, MTP layers excluded
  std::int64_t num_heads = 0;      // query heads
  std::int64_t num_kv_heads = 0;   // key/value heads; 0 for MLA, which has no k/v projections
  std::int64_t num_experts = 0;    // routed experts per MoE layer; 0 for dense models
  std::int64_t expert_groups = 1;  // groups the router picks experts from (DeepSeek's n_group)
  std::int64_t mtp_layers = 0;     // MTP layers included (they share the embedding and lm_head)
  bool tied_embeddings = false;    // lm_head shares embed_tokens (no lm_head tensor)
  std::vector<WeightTensor> tensors;
  // What the config says that refit does not act on unless told, a sentence each (its
  // quantization_config: the checkpoint's fp8, which --quantize moves).
  std::vector<std::string> notes;

  std::int64_t parameter_count() const;
  Bytes bytes() const;
  Bytes projection_bytes() const;  // bytes in gate/up/down projections
};

}  // namespace refit::models
