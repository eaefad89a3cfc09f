#pragma once
// Random reshard problems for planner and executor tests: random shapes, dtypes, meshes (1..3 axes over a
// shuffled rank list) and placements on both sides, so boxes are uneven, empty, replicated and
// strided in every combination.
#include <algorithm>
#include <random>
#include <string>

#include "refit/core/problem.h"
#include "test_problems.h"

namespace refit::testing {

class RandomProblems {
 public:
  explicit RandomProblems(std::uint64_t seed) : rng_(seed) {}

  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }

  Layout layout(const Shape& shape, std::int32_t first, std::int32_t ranks) {
    std::vector<std::int64_t> mesh;
    std::int64_t left = ranks;
    for (auto axes = uniform(1, 3); axes > 1; --axes) {
      std::vector<std::int64_t> divisors;
      for (std::int64_t d = 1; d <= left; ++d)
        if (left % d == 0) divisors.push_back(d);
      mesh.push_back(
          divisors[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(divisors.size()) - 1))]);
      left /= mesh.back();
    }
    mesh.push_back(left);
    auto list = rank_range(first, ranks);
    std::shuffle(list.begin(), list.end(), rng_);
    std::vector<Placement> placements;
    for (std::size_t a = 0; a < mesh.size(); ++a)
      placements.push_back(uniform(0, 2) == 0 ? Placement::replicate()
                                              : Placement::shard(static_cast<int>(uniform(
                                                    0, static_cast<std::int64_t>(shape.size()) - 1))));
    return Layout::make(shape, Mesh::make(mesh, list).value(), placements).value();
  }

  // `tensors` tensors of 1..3 dims with extents in [min_extent, max_extent].
  ReshardProblem problem(std::int32_t sources, std::int32_t destinations, std::int64_t tensors = 3,
                         std::int64_t max_extent = 12, std::int64_t min_extent = 1) {
    std::vector<TensorReshard> out;
    for (std::int64_t t = 0; t < tensors; ++t) {
      Shape shape(static_cast<std::size_t>(uniform(1, 3)));
      for (auto& s : shape) s = uniform(min_extent, max_extent);
      const auto dtype = all_dtypes()[static_cast<std::size_t>(
          uniform(0, static_cast<std::int64_t>(all_dtypes().size()) - 1))];
      // Designated initializers evaluate in order, so the random draws stay in the same order.
      out.push_back(TensorReshard{.tensor = make_tensor_spec("t" + std::to_string(t), shape, dtype).value(),
                                  .source = layout(shape, 0, sources),
                                  .destination = layout(shape, sources, destinations)});
    }
    return ReshardProblem::make(std::move(out), sources, destinations).value();
  }

 private:
  std::mt19937_64 rng_;
};

}  // namespace refit::testing
