#include "refit/core/mesh.h"

#include <unordered_set>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit {

Result<Mesh> Mesh::make(std::vector<std::int64_t> shape, std::vector<Rank> ranks,
                        std::vector<std::string> axis_names) {
  if (shape.empty() || shape.size() > kMaxMeshAxes)
    return out_of_range(fmt::format("mesh has {} axes, expected 1 to {}", shape.size(), kMaxMeshAxes));
  for (std::size_t a = 0; a < shape.size(); ++a)
    if (shape[a] <= 0)
      return out_of_range(fmt::format("mesh axis {} has size {}, must be >= 1", a, shape[a]));
  // Positions are materialised (one rank each), so the product is capped before anything is.
  const auto size = REFIT_TRY(checked_product(shape, limits::kMaxRanks, "mesh positions"));
  if (ranks.empty()) {
    for (std::int64_t i = 0; i < size; ++i) ranks.emplace_back(static_cast<std::int32_t>(i));
  } else if (static_cast<std::int64_t>(ranks.size()) != size) {
    return mismatch(fmt::format("ranks: {} ranks given for a mesh of {} positions", ranks.size(), size));
  }
  std::unordered_set<Rank> seen;
  for (std::size_t i = 0; i < ranks.size(); ++i) {
    if (ranks[i].value < 0) return out_of_range(fmt::format("ranks[{}] is negative ({})", i, ranks[i].value));
    if (ranks[i].value >= limits::kMaxJobRanks)
      return out_of_range(
          fmt::format("ranks[{}] is {}, must be < {}", i, ranks[i].value, limits::kMaxJobRanks));
    if (!seen.insert(ranks[i]).second)
      return invalid(fmt::format("ranks[{}]: rank {} appears twice", i, ranks[i].value));
  }
  if (!axis_names.empty() && axis_names.size() != shape.size())
    return mismatch(fmt::format("axis_names: {} names for {} mesh axes", axis_names.size(), shape.size()));
  Mesh m;
  m.shape_ = std::move(shape);
  m.ranks_ = std::move(ranks);
  m.axis_names_ = std::move(axis_names);
  return m;
}

std::vector<std::int64_t> Mesh::coord_of_position(std::int64_t position) const {
  std::vector<std::int64_t> coord(shape_.size());
  for (std::size_t a = shape_.size(); a-- > 0;) {
    coord[a] = position % shape_[a];
    position /= shape_[a];
  }
  return coord;
}

std::int64_t Mesh::position_of_coord(const std::vector<std::int64_t>& coord) const {
  std::int64_t p = 0;
  for (std::size_t a = 0; a < shape_.size(); ++a) p = p * shape_[a] + coord[a];
  return p;
}

std::optional<std::int64_t> Mesh::position_of_rank(Rank r) const {
  // Meshes of consecutive ranks are the rule: try the position that would make them so first.
  if (!ranks_.empty()) {
    const std::int64_t guess = std::int64_t{r.value} - ranks_.front().value;
    if (guess >= 0 && guess < size() && ranks_[static_cast<std::size_t>(guess)] == r) return guess;
  }
  for (std::size_t i = 0; i < ranks_.size(); ++i)
    if (ranks_[i] == r) return static_cast<std::int64_t>(i);
  return std::nullopt;
}

}  // namespace refit
