// Shards stored as strided regions of other buffers (framework parameters). Property: for random
// problems and every strategy, whatever random tiling of each rank's boxes into regions (cut
// along any dim, shuffled, padded strides, gaps, shared buffers), running the lowered programs
// on host memory leaves every destination region holding exactly the pattern of its elements,
// and every byte outside the regions zero. And a shard stored as one row-major region of its own
// buffer is lowered exactly as without regions.
#include <algorithm>
#include <map>
#include <random>

#include <gtest/gtest.h>

#include "random_problems.h"
#include "refit/planner/strategy.h"
#include "stored_run.h"
#include "strategy_names.h"
#include "test_cluster.h"

namespace refit::lowering {
namespace {

constexpr ZeroCopyRule kManyPuts{.max_runs = 16, .min_mean_run = Bytes{4096}};
constexpr ZeroCopyRule kOneRun{};

// Random storage of one side: every non-empty box of a rank cut into 1..3 slabs along a random
// dim, each slab placed with strides of padded extents (row-major over extent + 0..2) at a random
// gap after the previous region of one of two parameters per dtype, in shuffled order.
class RandomStorage {
 public:
  explicit RandomStorage(std::uint64_t seed) : rng_(seed) {}

  models::StorageMap side(const ReshardProblem& p, bool source) {
    models::StorageMap out{.framework = "random", .first_rank = source ? 0 : p.source_ranks(), .ranks = {}};
    const auto count = source ? p.source_ranks() : p.destination_ranks();
    for (std::int32_t r = out.first_rank; r < out.first_rank + count; ++r)
      out.ranks.push_back(rank(p, Rank{r}, source));
    return out;
  }

 private:
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    return std::uniform_int_distribution<std::int64_t>(lo, hi)(rng_);
  }

  std::vector<models::StoredRegion> slabs(std::uint32_t tensor, const Box& box) {
    const auto d = static_cast<std::size_t>(uniform(0, static_cast<std::int64_t>(box.rank()) - 1));
    std::vector<std::int64_t> cuts{box.offset[d], box.offset[d] + box.extent[d]};
    for (auto n = uniform(0, 2); n > 0; --n) cuts.push_back(uniform(cuts[0], cuts[1]));
    std::ranges::sort(cuts);
    std::vector<models::StoredRegion> out;
    for (std::size_t i = 0; i + 1 < cuts.size(); ++i) {
      if (cuts[i] == cuts[i + 1]) continue;
      Box b = box;
      b.offset[d] = cuts[i];
      b.extent[d] = cuts[i + 1] - cuts[i];
      out.push_back(
          models::StoredRegion{.tensor = tensor, .box = b, .parameter = 0, .offset = 0, .strides = {}});
    }
    return out;
  }

  models::RankStorage rank(const ReshardProblem& p, Rank r, bool source) {
    std::vector<models::StoredRegion> regions;
    for (std::uint32_t t = 0; t < p.tensors().size(); ++t) {
      const Layout& l = source ? p.tensors()[t].source : p.tensors()[t].destination;
      if (!l.mesh().position_of_rank(r)) continue;
      const auto box = l.local_box(r).value();
      if (!box.empty()) std::ranges::copy(slabs(t, box), std::back_inserter(regions));
    }
    std::ranges::shuffle(regions, rng_);
    models::RankStorage out;
    std::map<std::pair<DType, std::int64_t>, std::int32_t> parameter;  // (dtype, which of two) -> index
    std::vector<std::int64_t> used;
    for (auto& region : regions) {
      const auto dtype = p.tensors()[region.tensor].tensor.dtype;
      const auto [it, fresh] =
          parameter.try_emplace({dtype, uniform(0, 1)}, static_cast<std::int32_t>(used.size()));
      if (fresh) {
        out.parameters.push_back(models::FrameworkParameter{
            .name = fmt::format("p{}", used.size()), .shape = {0}, .dtype = dtype});
        used.push_back(0);
      }
      region.parameter = it->second;
      auto& at = used[static_cast<std::size_t>(it->second)];
      region.strides = Shape(region.box.rank(), 1);
      std::int64_t span = region.box.extent.back() + uniform(0, 2);
      for (std::size_t d = region.box.rank() - 1; d-- > 0;) {
        region.strides[d] = span;
        span *= region.box.extent[d] + uniform(0, 2);
      }
      region.offset = at + uniform(0, 3);
      at = region.offset + span;
    }
    for (std::size_t i = 0; i < used.size(); ++i) out.parameters[i].shape = {used[i] + uniform(0, 3)};
    out.regions = std::move(regions);
    return out;
  }

  std::mt19937_64 rng_;
};

class StoredEveryStrategy : public ::testing::TestWithParam<std::string_view> {};

TEST_P(StoredEveryStrategy, RandomRegionsRunToTheRightBytesAndLeavePaddingZero) {
  refit::testing::RandomProblems random(23);
  RandomStorage storage(5);
  for (int i = 0; i < 30; ++i) {
    const auto src = static_cast<std::int32_t>(random.uniform(1, 4));
    const auto dst = static_cast<std::int32_t>(random.uniform(1, 4));
    const auto problem = random.problem(src, dst);
    const auto cluster = refit::testing::make_test_cluster((src + dst + 1) / 2, 2, src, dst);
    const auto plan = make_plan(GetParam(), problem, cluster, PlanOptions{.chunk = Bytes{40}}).value();
    const auto sources = storage.side(problem, true);
    const auto destinations = storage.side(problem, false);
    for (const auto& rule : {kManyPuts, kOneRun}) {
      const auto ran = testing::run_stored(plan, problem, sources, destinations, rule);
      ASSERT_TRUE(ran) << "problem " << i << ": " << ran.error().message;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Regions, StoredEveryStrategy, ::testing::ValuesIn(strategy_names()),
                         [](const auto& info) {
                           std::string name(info.param);
                           std::ranges::replace(name, '-', '_');
                           return name;
                         });

// One region per shard, row-major at offset 0 of buffer i for shard i, is the default layout:
// every chunk takes the same path for the same reason with the same runs.
TEST(Regions, OneRowMajorRegionPerShardLowersAsWithout) {
  refit::testing::RandomProblems random(3);
  for (int i = 0; i < 20; ++i) {
    const auto problem = random.problem(3, 2);
    const auto cluster = refit::testing::make_test_cluster(3, 2, 3, 2);
    const auto plan = make_plan("refit", problem, cluster, PlanOptions{.chunk = Bytes{40}}).value();
    const auto lowered = LoweredPlan::make(plan, Bytes{96}).value();
    for (std::int32_t r = 0; r < problem.world_size(); ++r) {
      auto plain = shards_of(problem, Rank{r});
      auto regioned = plain;
      for (auto* side : {&regioned.sources, &regioned.destinations})
        for (std::size_t s = 0; s < side->size(); ++s) {
          auto& shard = (*side)[s];
          Shape strides(shard.box.rank(), 1);
          for (std::size_t d = shard.box.rank() - 1; d-- > 0;)
            strides[d] = strides[d + 1] * shard.box.extent[d + 1];
          shard.regions = {Region{
              .box = shard.box, .buffer = static_cast<std::int32_t>(s), .offset = 0, .strides = strides}};
        }
      const auto a = lower_rank(lowered, Rank{r}, plain, kManyPuts).value();
      const auto b = lower_rank(lowered, Rank{r}, regioned, kManyPuts).value();
      ASSERT_EQ(a.sends().size(), b.sends().size());
      ASSERT_EQ(a.receives().size(), b.receives().size());
      for (std::size_t k = 0; k < a.sends().size(); ++k)
        for (std::size_t c = 0; c < a.sends()[k].chunks.size(); ++c) {
          EXPECT_EQ(a.sends()[k].chunks[c].path, b.sends()[k].chunks[c].path);
          EXPECT_EQ(a.sends()[k].chunks[c].why, b.sends()[k].chunks[c].why);
          if (a.sends()[k].chunks[c].path == CopyPath::kInPlace)
            EXPECT_EQ(a.runs(a.sends()[k], static_cast<std::int64_t>(c)),
                      b.runs(b.sends()[k], static_cast<std::int64_t>(c)));
        }
      for (std::size_t k = 0; k < a.receives().size(); ++k)
        for (std::size_t c = 0; c < a.receives()[k].chunks.size(); ++c) {
          EXPECT_EQ(a.receives()[k].chunks[c].path, b.receives()[k].chunks[c].path);
          EXPECT_EQ(a.receives()[k].chunks[c].why, b.receives()[k].chunks[c].why);
          if (a.receives()[k].chunks[c].path == CopyPath::kInPlace)
            EXPECT_EQ(a.runs(a.receives()[k], static_cast<std::int64_t>(c)),
                      b.runs(b.receives()[k], static_cast<std::int64_t>(c)));
        }
    }
  }
}

// Regions must tile their shard: a gap or an overlap is refused, naming the tensor.
TEST(Regions, RegionsThatDoNotTileTheShardAreRefused) {
  refit::testing::RandomProblems random(1);
  const auto problem = random.problem(1, 1, 1, 6, 2);
  const auto cluster = refit::testing::make_test_cluster(1, 2, 1, 1);
  const auto plan = make_plan("refit", problem, cluster, PlanOptions{}).value();
  const auto lowered = LoweredPlan::make(plan, Bytes{96}).value();
  auto shards = shards_of(problem, Rank{0});
  ASSERT_FALSE(shards.sources.empty());
  auto& s = shards.sources[0];
  Box half = s.box;
  half.extent[0] = 1;  // a region covering one row of at least two
  s.regions = {Region{.box = half, .buffer = 0, .offset = 0, .strides = Shape(half.rank(), 1)}};
  const auto gap = lower_rank(lowered, Rank{0}, shards, kManyPuts);
  ASSERT_FALSE(gap);
  EXPECT_NE(gap.error().message.find("regions cover"), std::string::npos) << gap.error().message;
  s.regions.push_back(s.regions[0]);
  const auto twice = lower_rank(lowered, Rank{0}, shards, kManyPuts);
  ASSERT_FALSE(twice);
  EXPECT_NE(twice.error().message.find("share elements"), std::string::npos) << twice.error().message;
}

}  // namespace
}  // namespace refit::lowering
