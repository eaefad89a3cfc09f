#pragma once
// Pieces shared by the Megatron and vLLM layout rules.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/layout.h"
#include "refit/models/model_spec.h"

namespace refit::models {

// Ranks first, first+1, ..., first+count-1.
std::vector<Rank> rank_block(std::int64_t first, std::int64_t count);

// "tp=3 does not divide num_attention_heads=64" unless count % size == 0.
[[nodiscard]] Result<void> check_divides(std::int64_t size, std::string_view option, std::int64_t count,
                                         std::string_view what);
// A tensor split into `parts` along `dim` must split evenly (frameworks do not pad them).
[[nodiscard]] Result<void> check_even_split(const WeightTensor& tensor, std::optional<int> dim,
                                            std::int64_t parts, std::string_view option);

// Placements for a tensor-parallel mesh axis: Shard(dim), or Replicate when dim is none.
Placement shard_or_replicate(std::optional<int> dim);

// Mesh::make + Layout::make, errors prefixed with the tensor's name.
[[nodiscard]] Result<Layout> make_layout(const WeightTensor& tensor, std::vector<std::int64_t> mesh_shape,
                                         std::vector<Rank> ranks, std::vector<Placement> placements);

}  // namespace refit::models
