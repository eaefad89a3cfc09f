#include "engine_layouts.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::planner_detail {

RankKeeper::RankKeeper(std::vector<std::int32_t> new_rank) : new_rank_(std::move(new_rank)) {}

Result<Mesh> RankKeeper::cut(const Mesh& mesh) const {
  const std::int64_t slices = mesh.shape()[0];
  const std::int64_t per_slice = mesh.size() / slices;
  std::vector<Rank> ranks;
  for (std::int64_t s = 0; s < slices; ++s) {
    std::int64_t in = 0;
    for (std::int64_t k = 0; k < per_slice; ++k)
      in += new_rank_[static_cast<std::size_t>(mesh.rank_at(s * per_slice + k).value)] >= 0 ? 1 : 0;
    if (in != 0 && in != per_slice)
      return invalid(fmt::format(
          "slice {} of its destination mesh's first axis holds ranks of engines kept and left out; the "
          "first axis must separate the engines",
          s));
    for (std::int64_t k = 0; k < in; ++k)
      ranks.push_back(Rank{new_rank_[static_cast<std::size_t>(mesh.rank_at(s * per_slice + k).value)]});
  }
  if (ranks.empty()) return invalid("none of the engines kept holds any of it");
  auto shape = mesh.shape();
  shape[0] = static_cast<std::int64_t>(ranks.size()) / per_slice;
  return Mesh::make(std::move(shape), std::move(ranks), mesh.axis_names());
}

Result<Layout> RankKeeper::keep(const Layout& layout) {
  const Mesh& mesh = layout.mesh();
  auto it = std::ranges::find(cuts_, mesh, &std::pair<Mesh, Mesh>::first);
  if (it == cuts_.end()) it = cuts_.insert(cuts_.end(), {mesh, REFIT_TRY(cut(mesh))});
  if (it->second.shape()[0] < mesh.shape()[0] && layout.placements()[0].is_shard())
    return invalid(
        "its destination mesh shards it along the first axis, which must replicate across the engines "
        "when only some are kept");
  return Layout::make(layout.tensor_shape(), it->second, layout.placements());
}

}  // namespace refit::planner_detail
