#pragma once
// Destination layouts cut to some engines' ranks: what a membership keeps of a layout, and what a
// join's peers hold (membership.h).
#include <cstdint>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/layout.h"
#include "refit/core/problem.h"

namespace refit::planner_detail {

// The part of a layout held by the ranks kept, renumbered: new_rank[g] is what global rank g
// becomes, or -1 for a rank left out. The first mesh axis must separate kept ranks from the
// others (each of its slices all kept or all left out) and, unless every slice is kept,
// replicate, so that every kept rank holds the very box it held. Errors say which rule fails.
// Each distinct mesh is cut once: a model's many tensors share a few meshes.
class RankKeeper {
 public:
  explicit RankKeeper(std::vector<std::int32_t> new_rank);
  [[nodiscard]] Result<Layout> keep(const Layout& layout);

 private:
  [[nodiscard]] Result<Mesh> cut(const Mesh& mesh) const;
  std::vector<std::int32_t> new_rank_;
  std::vector<std::pair<Mesh, Mesh>> cuts_;  // (a mesh, its cut)
};

}  // namespace refit::planner_detail
