#pragma once
// Global ranks laid out row-major in an N-d shape (1..4 axes).
#include <optional>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit {

inline constexpr std::size_t kMaxMeshAxes = 4;

class Mesh {
 public:
  // `ranks` empty means 0..size-1. Checks axis count, positive sizes, rank count, duplicates.
  [[nodiscard]] static Result<Mesh> make(std::vector<std::int64_t> shape, std::vector<Rank> ranks = {},
                                         std::vector<std::string> axis_names = {});

  const std::vector<std::int64_t>& shape() const { return shape_; }
  const std::vector<Rank>& ranks() const { return ranks_; }
  const std::vector<std::string>& axis_names() const { return axis_names_; }
  std::size_t ndim() const { return shape_.size(); }
  std::int64_t size() const { return static_cast<std::int64_t>(ranks_.size()); }

  // Mesh position (row-major index) <-> coordinate.
  std::vector<std::int64_t> coord_of_position(std::int64_t position) const;
  std::int64_t position_of_coord(const std::vector<std::int64_t>& coord) const;
  std::optional<std::int64_t> position_of_rank(Rank r) const;
  Rank rank_at(std::int64_t position) const { return ranks_[static_cast<std::size_t>(position)]; }

  bool operator==(const Mesh&) const = default;

 private:
  std::vector<std::int64_t> shape_;
  std::vector<Rank> ranks_;
  std::vector<std::string> axis_names_;
};

}  // namespace refit
