#pragma once
// Pieces shared by the Megatron and vLLM storage rules: one rule per side says where one logical
// tensor's box on one rank lies in that rank's parameters; build_storage() runs it over every
// rank and tensor and merges parameters that several tensors share (q, k and v in one fused
// weight).
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/quant_scheme.h"
#include "refit/models/model_spec.h"
#include "refit/models/storage_map.h"

namespace refit::models::detail {

// One logical tensor's box on one rank, as a rule sees it.
struct TensorOnRank {
  std::uint32_t index = 0;               // in the problem
  const WeightTensor* tensor = nullptr;  // the model's (for a quantized weight's scales, the weight's)
  Box box;                               // non-empty
  Rank rank;
  const ModelSpec* model = nullptr;
  const ReshardProblem* problem = nullptr;
  bool source = true;  // which side's layout `box` comes from
  const std::unordered_map<std::string, std::uint32_t>* names = nullptr;  // tensor name -> index

  // The box this rank holds of the model's tensor called `name` on the same side (empty when
  // none), e.g. k_proj's next to q_proj's.
  [[nodiscard]] Result<Box> sibling(const std::string& name) const;
};

// Where a rule puts one tensor's box: the parameters it lands in (merged by name with those of
// other tensors on the rank) and the regions, whose `parameter` indexes `parameters` here.
struct Stored {
  std::vector<FrameworkParameter> parameters;
  std::vector<StoredRegion> regions;
};

using StorageRule = std::function<Result<Stored>(const TensorOnRank&)>;
// The parameter a framework keeps the FP8 scales of a weight parameter in.
using ScaleParameterRule = std::function<Result<FrameworkParameter>(QuantScheme, const FrameworkParameter&)>;

// Runs `rule` for every non-empty box of every rank on one side (and for a vocab tensor's empty
// box: the rank's padded partition holds none of its rows, but the framework holds it), and for
// the scales of quantized weights the side holds, `rule` of their weight with `scales`. Errors
// name the rank and tensor; two tensors declaring one parameter name with different shapes or
// dtypes are refused.
[[nodiscard]] Result<StorageMap> build_storage(std::string framework, const ModelSpec& model,
                                               const ReshardProblem& problem, bool source,
                                               const StorageRule& rule, const ScaleParameterRule& scales);

// Rows [begin, end) of `box` (dim 0, logical coordinates) at row `at` of parameter `parameter`,
// whose rows hold the box's other dims row-major.
StoredRegion rows_at(const TensorOnRank& t, std::int64_t begin, std::int64_t end, std::int64_t at,
                     std::int32_t parameter);
// The shape of a parameter of `rows` rows of the box's other dims.
Shape rows_shape(const Box& box, std::int64_t rows);

// One tensor's whole box as the parameter `name`, row-major, `rows` rows long (padding after
// it when rows exceed the box's).
Stored whole(const TensorOnRank& t, std::string name, std::int64_t rows);

// Logical members concatenated along dim 0 in one parameter, each member's box in order
// ([q; k; v], [gate; up]): `t` is one of them.
[[nodiscard]] Result<Stored> concatenated(const TensorOnRank& t, std::string name,
                                          const std::vector<std::string>& members);

// A vocab-parallel weight in a framework that pads the vocab and gives each of `tp` ranks
// `partition` rows: the rank's real rows must be its logical box (else refused, naming the
// sizes); the parameter is the partition, padding rows last. An empty box (the partition lies
// past the vocab) gives the parameter with no region.
[[nodiscard]] Result<Stored> padded_vocab(const TensorOnRank& t, std::string name, std::int64_t partition);

// Experts [begin, end) of a stacked expert tensor's box [E, rows, ...] at row `at` of dim 1 of
// parameter `parameter`, which holds `rows` rows per expert of the box's other dims row-major
// (vLLM's w13 [E_local, 2*I, H] holds gate at row 0 and up at row I; one Megatron per-expert
// parameter [2*I, H] holds one expert).
StoredRegion expert_rows(const TensorOnRank& t, std::int64_t begin, std::int64_t end, std::int64_t rows,
                         std::int64_t at, std::int32_t parameter);

// The HF name with "model.layers.<L>." removed, and L; nothing outside decoder layers.
struct LayerName {
  std::int64_t layer = 0;
  std::string rest;  // e.g. "self_attn.q_proj.weight"
};
std::optional<LayerName> layer_name(std::string_view hf_name);

// "the storage rules of <framework> have no rule for tensor '<name>'".
std::unexpected<Error> no_rule(std::string_view framework, const TensorOnRank& t);

}  // namespace refit::models::detail
