#pragma once
// Where each rank's logical shards lie in a framework's own parameters. Plans stay over logical
// tensors (HF names, HF shapes); a storage map says, for one side, which parameters each rank
// holds (named as the framework's state dict spells them) and where every element of the rank's
// logical boxes lies in them: a strided region per piece, so that fused [q; k; v] weights
// (interleaved per query group in Megatron), [gate; up] weights, stacked experts and padded
// vocabularies are read and written where they lie. The framework rules, each with the function
// it follows, are in docs/frameworks.md ("Storage").
//
// Elements of a parameter that no region covers are padding (vocab rows past the vocabulary).
// Both frameworks zero-fill them; refit never writes them, so zeroed parameters stay zeroed.
#include <cstdint>
#include <string>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/dtype.h"
#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/units.h"
#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"

namespace refit::models {

// A framework parameter on one rank: a buffer of its own, row-major.
struct FrameworkParameter {
  std::string name;  // as the framework's named_parameters() spells it on that rank
  Shape shape;       // elements per dim on that rank (the local shard, padding included)
  DType dtype = DType::kBF16;

  std::int64_t elements() const { return element_count(shape); }
  bool operator==(const FrameworkParameter&) const = default;
};

// Part of a rank's box of a logical tensor, inside one of the rank's parameters.
struct StoredRegion {
  std::uint32_t tensor = 0;    // index into the problem's tensors
  Box box;                     // logical (HF) coordinates; part of the rank's box of that tensor
  std::int32_t parameter = 0;  // index into RankStorage::parameters
  std::int64_t offset = 0;     // elements from the parameter's first element to the box's first
  Shape strides;               // elements between neighbours along each dim of the box
  bool operator==(const StoredRegion&) const = default;
};

// One rank's parameters and the regions that tile each of its non-empty logical boxes.
struct RankStorage {
  std::vector<FrameworkParameter> parameters;
  std::vector<StoredRegion> regions;  // in tensor order, then along the tensor
  bool operator==(const RankStorage&) const = default;
};

// One side of a refit as a framework stores it.
struct StorageMap {
  std::string framework;        // "megatron" or "vllm"
  std::int32_t first_rank = 0;  // global rank of ranks[0]
  std::vector<RankStorage> ranks;

  bool operator==(const StorageMap&) const = default;
  // Precondition: first_rank <= rank < first_rank + ranks.size().
  const RankStorage& of(Rank rank) const { return ranks[static_cast<std::size_t>(rank.value - first_rank)]; }
};

// Megatron-Core's parameters (TE layer spec, TEGroupedMLP experts) on the training ranks of
// `problem`, which build_problem(model, train, ...) made. Errors name the tensor and rank: a
// weight without a rule, a q/k/v box that is not one rank's rows of linear_qkv, or a vocab whose
// padded partitions are not the logical boxes.
[[nodiscard]] Result<StorageMap> megatron_storage(const ModelSpec& model, const MegatronConfig& train,
                                                  const ReshardProblem& problem);

// vLLM's parameters on the inference ranks of `problem`, which build_problem(model, ..., infer)
// made. Errors as for megatron_storage().
[[nodiscard]] Result<StorageMap> vllm_storage(const ModelSpec& model, const VllmConfig& infer,
                                              const ReshardProblem& problem);

}  // namespace refit::models
