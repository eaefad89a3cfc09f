// Random small problems on random clusters: every strategy's plan must validate (every
// destination element written exactly once, every sender holding what it sends), and refit never
// moves more network bytes than direct, since per (piece, domain) refit sends at most one network
// copy while direct sends one per replica whose UNIFORM source is outside the domain.
#include <random>

#include <gtest/gtest.h>

#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

class Generator {
 public:
  explicit Generator(std::uint64_t seed) : rng_(seed) {}
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }

  // A random factorisation of `ranks` into 1..3 mesh axes over a shuffled rank list.
  Layout layout(const Shape& shape, std::int32_t first, std::int32_t ranks) {
    std::vector<std::int64_t> mesh;
    std::int64_t left = ranks;
    const auto axes = uniform(1, 3);
    for (std::int64_t a = 0; a + 1 < axes; ++a) {
      std::vector<std::int64_t> divisors;
      for (std::int64_t d = 1; d <= left; ++d)
        if (left % d == 0) divisors.push_back(d);
      const auto d = divisors[static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(divisors.size()) - 1))];
      mesh.push_back(d);
      left /= d;
    }
    mesh.push_back(left);
    auto list = testing::rank_range(first, ranks);
    std::shuffle(list.begin(), list.end(), rng_);
    std::vector<Placement> placements;
    for (std::size_t a = 0; a < mesh.size(); ++a)
      placements.push_back(uniform(0, 2) == 0 ? Placement::replicate()
                                              : Placement::shard(static_cast<int>(uniform(0, static_cast<std::int64_t>(shape.size()) - 1))));
    return Layout::make(shape, Mesh::make(mesh, list).value(), placements).value();
  }

  ReshardProblem problem(std::int32_t src, std::int32_t dst) {
    std::vector<TensorReshard> tensors;
    const auto count = uniform(1, 3);
    for (std::int64_t t = 0; t < count; ++t) {
      Shape shape(static_cast<std::size_t>(uniform(1, 3)));
      for (auto& s : shape) s = uniform(0, 9);
      const auto dtype = all_dtypes()[static_cast<std::size_t>(uniform(0, 9))];
      tensors.push_back(TensorReshard{make_tensor_spec("t" + std::to_string(t), shape, dtype).value(),
                                      layout(shape, 0, src), layout(shape, src, dst)});
    }
    return ReshardProblem::make(std::move(tensors), src, dst).value();
  }

 private:
  std::mt19937_64 rng_;
};

TEST(PlanProperty, TwoThousandRandomProblemsValidateForEveryStrategy) {
  Generator gen(42);
  int checked = 0;
  for (int i = 0; i < 2000; ++i) {
    const auto nodes = static_cast<std::int32_t>(gen.uniform(1, 4));
    const auto per_node = static_cast<std::int32_t>(gen.uniform(1, 4));
    const auto gpus = nodes * per_node;
    if (gpus < 2) continue;
    const auto src = static_cast<std::int32_t>(gen.uniform(1, gpus - 1));
    const auto dst = static_cast<std::int32_t>(gen.uniform(1, gpus - src));
    const auto problem = gen.problem(src, dst);
    const auto cluster = testing::make_test_cluster(nodes, per_node, src, dst);
    const auto strategy = strategy_names()[static_cast<std::size_t>(i) % strategy_names().size()];
    SCOPED_TRACE(::testing::Message() << "case " << i << " strategy " << strategy << " on "
                                      << nodes << "x" << per_node << ", " << src << "->" << dst);
    const auto plan = make_plan(strategy, problem, cluster);
    ASSERT_TRUE(plan) << plan.error().message;
    const auto ok = validate(*plan, problem);
    ASSERT_TRUE(ok) << ok.error().message;
    const auto refit = compute_stats(make_plan("refit", problem, cluster).value(), cluster);
    const auto direct = compute_stats(make_plan("direct", problem, cluster).value(), cluster);
    ASSERT_LE(refit.network_bytes, direct.network_bytes);
    ++checked;
  }
  EXPECT_GE(checked, 1800);
}

}  // namespace
}  // namespace refit
