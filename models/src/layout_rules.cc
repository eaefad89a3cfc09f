#include "layout_rules.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::models {

std::vector<Rank> rank_block(std::int64_t first, std::int64_t count) {
  std::vector<Rank> ranks;
  ranks.reserve(static_cast<std::size_t>(count));
  for (std::int64_t r = first; r < first + count; ++r) ranks.emplace_back(static_cast<std::int32_t>(r));
  return ranks;
}

Result<void> check_divides(std::int64_t size, std::string_view option, std::int64_t count,
                           std::string_view what) {
  if (count % size != 0)
    return mismatch(fmt::format("{}={} does not divide {}={}", option, size, what, count));
  return {};
}

Result<void> check_even_split(const WeightTensor& tensor, std::optional<int> dim, std::int64_t parts,
                              std::string_view option) {
  if (!dim || parts == 1) return {};
  const auto extent = tensor.spec.shape[static_cast<std::size_t>(*dim)];
  if (extent % parts != 0)
    return mismatch(fmt::format("{}={} does not divide dim {} ({}) of {}", option, parts, *dim, extent,
                                tensor.spec.name));
  return {};
}

Placement shard_or_replicate(std::optional<int> dim) {
  return dim ? Placement::shard(*dim) : Placement::replicate();
}

Result<Layout> make_layout(const WeightTensor& tensor, std::vector<std::int64_t> mesh_shape,
                           std::vector<Rank> ranks, std::vector<Placement> placements) {
  auto mesh = REFIT_TRY_IN(Mesh::make(std::move(mesh_shape), std::move(ranks)), tensor.spec.name);
  return REFIT_TRY_IN(Layout::make(tensor.spec.shape, std::move(mesh), std::move(placements)),
                      tensor.spec.name);
}

}  // namespace refit::models
