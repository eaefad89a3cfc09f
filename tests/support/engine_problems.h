#pragma once
// Random problems whose destination side is `engines` engines of equal size, as vLLM's
// engines=N makes them: each destination mesh is [engines, ...] with the first axis replicating
// (every engine holds a copy), the other axes random as RandomProblems draws them.
#include <algorithm>
#include <random>
#include <string>

#include "random_problems.h"
#include "test_cluster.h"

namespace refit::testing {

inline Layout engine_layout(RandomProblems& gen, const Shape& shape, std::int32_t first, std::int32_t engines,
                            std::int32_t per_engine) {
  const Layout one = gen.layout(shape, 0, per_engine);
  std::vector<std::int64_t> mesh{engines};
  for (const auto n : one.mesh().shape()) mesh.push_back(n);
  std::vector<Rank> ranks;
  for (std::int32_t e = 0; e < engines; ++e)
    for (const Rank r : one.mesh().ranks()) ranks.push_back(Rank{first + e * per_engine + r.value});
  std::vector<Placement> placements{Placement::replicate()};
  for (const auto& p : one.placements()) placements.push_back(p);
  return Layout::make(shape, Mesh::make(mesh, ranks).value(), placements).value();
}

inline ReshardProblem engine_problem(RandomProblems& gen, std::int32_t sources, std::int32_t engines,
                                     std::int32_t per_engine, std::int64_t tensors) {
  std::vector<TensorReshard> out;
  for (std::int64_t t = 0; t < tensors; ++t) {
    Shape shape(static_cast<std::size_t>(gen.uniform(1, 3)));
    for (auto& s : shape) s = gen.uniform(1, 9);
    const auto dtype = all_dtypes()[static_cast<std::size_t>(
        gen.uniform(0, static_cast<std::int64_t>(all_dtypes().size()) - 1))];
    auto spec = make_tensor_spec("t" + std::to_string(t), shape, dtype).value();
    auto source = gen.layout(shape, 0, sources);
    out.push_back(TensorReshard{.tensor = std::move(spec),
                                .source = std::move(source),
                                .destination = engine_layout(gen, shape, sources, engines, per_engine)});
  }
  return ReshardProblem::make(std::move(out), sources, engines * per_engine).value();
}

// One draw of the membership tests: 2-4 engines of 1-3 ranks, 1-4 training ranks, 1-3 tensors,
// on a cluster of 1-4 GPUs a node.
struct EngineCase {
  std::int32_t engines;
  std::int32_t sources;
  ReshardProblem problem;
  PlacedCluster cluster;
};

inline EngineCase random_engine_case(RandomProblems& gen) {
  const auto engines = static_cast<std::int32_t>(gen.uniform(2, 4));
  const auto per_engine = static_cast<std::int32_t>(gen.uniform(1, 3));
  const auto sources = static_cast<std::int32_t>(gen.uniform(1, 4));
  auto problem = engine_problem(gen, sources, engines, per_engine, gen.uniform(1, 3));
  const auto per_node = static_cast<std::int32_t>(gen.uniform(1, 4));
  auto cluster = make_test_cluster((problem.world_size() + per_node - 1) / per_node, per_node, sources,
                                   problem.destination_ranks());
  return EngineCase{
      .engines = engines, .sources = sources, .problem = std::move(problem), .cluster = std::move(cluster)};
}

// A member flag per engine, each drawn with probability 1/2, at least one set.
inline std::vector<bool> random_members(std::int32_t engines, std::mt19937& rng) {
  std::vector<bool> members(static_cast<std::size_t>(engines));
  do {
    for (auto&& m : members) m = std::bernoulli_distribution(0.5)(rng);
  } while (std::ranges::none_of(members, [](bool b) { return b; }));
  return members;
}

}  // namespace refit::testing
