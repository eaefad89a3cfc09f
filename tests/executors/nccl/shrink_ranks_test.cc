// The communicator ranks after ncclCommShrink (shrink_ranks.h), without NCCL.
//
// Expected maths: NCCL removes the excluded ranks and numbers the rest in their old order, so
// parent rank p keeps child rank p - (excluded ranks below p); the reference below counts them
// for each rank. A process whose plan rank is gone is excluded with every plan rank it runs.
#include <gtest/gtest.h>

#include <random>

#include "shrink_ranks.h"

namespace refit::nccl_detail {
namespace {

TEST(ShrinkRanks, SurvivorsCloseTheGapsInOrder) {
  // Plan ranks 0..5 on processes 0..5; ranks 1 and 4 die: 0->0, 2->1, 3->2, 5->3.
  const CommRankMap map{0, 1, 2, 3, 4, 5};
  const std::vector<std::int32_t> gone{4, 1};
  const auto s = shrink_ranks(map, 6, gone, 0, 9).value();
  EXPECT_EQ(s.exclude, (std::vector<std::int32_t>{1, 4}));
  EXPECT_EQ(s.child_of, (std::vector<std::int32_t>{0, kNoCommRank, 1, 2, kNoCommRank, 3}));
  EXPECT_EQ(s.child_size, 4);
  EXPECT_EQ(s.comm_rank_of, (CommRankMap{0, kNoCommRank, 1, 2, kNoCommRank, 3}));
  EXPECT_EQ(s.gone, (std::vector<bool>{false, true, false, false, true, false}));
}

TEST(ShrinkRanks, AProcessGoesWithEveryPlanRankItRuns) {
  // Plan ranks in pairs on 3 processes; plan rank 3 dies, so process 1 and plan rank 2 go too.
  const CommRankMap map{0, 0, 1, 1, 2, 2};
  const std::vector<std::int32_t> gone{3};
  const auto s = shrink_ranks(map, 3, gone, 2, 1).value();
  EXPECT_EQ(s.exclude, std::vector<std::int32_t>{1});
  EXPECT_EQ(s.comm_rank_of, (CommRankMap{0, 0, kNoCommRank, kNoCommRank, 1, 1}));
}

TEST(ShrinkRanks, MatchTheCountingReferenceOverRepeatedShrinks) {
  std::mt19937 rng(33);
  for (int round = 0; round < 200; ++round) {
    const auto size = std::uniform_int_distribution<std::int32_t>(2, 12)(rng);
    CommRankMap map(static_cast<std::size_t>(size));
    for (std::int32_t r = 0; r < size; ++r) map[static_cast<std::size_t>(r)] = r;
    std::int32_t parent_size = size;
    std::vector<std::int32_t> original(map);  // plan rank -> rank in the first communicator
    // Shrink a few times, as successive memberships lose ranks; plan rank 0 always survives.
    for (std::uint64_t epoch = 2; epoch < 5; ++epoch) {
      std::vector<std::int32_t> gone;
      for (std::int32_t r = 1; r < size; ++r)
        if (map[static_cast<std::size_t>(r)] != kNoCommRank && std::bernoulli_distribution(0.2)(rng))
          gone.push_back(r);
      const auto s = shrink_ranks(map, parent_size, gone, map[0], epoch).value();
      for (std::int32_t p = 0; p < parent_size; ++p) {
        const bool out = std::ranges::find(s.exclude, p) != s.exclude.end();
        const auto below = std::ranges::count_if(s.exclude, [&](std::int32_t x) { return x < p; });
        const auto child = child_rank(s, p);
        ASSERT_EQ(child.has_value(), !out) << "round " << round << ", rank " << p;
        if (child) EXPECT_EQ(*child, p - below);
      }
      EXPECT_EQ(s.child_size, parent_size - static_cast<std::int32_t>(s.exclude.size()));
      for (std::size_t r = 0; r < map.size(); ++r) EXPECT_EQ(s.gone[r], s.comm_rank_of[r] == kNoCommRank);
      map = s.comm_rank_of;
      parent_size = s.child_size;
    }
  }
}

// The fence: a process excluded at an epoch has no child rank, and the refusal names it.
TEST(ShrinkRanks, AnExcludedRankOfAnOlderMembershipIsRefused) {
  const CommRankMap map{0, 1, 2};
  const std::vector<std::int32_t> gone{2};
  const auto s = shrink_ranks(map, 3, gone, 0, 4).value();
  const auto stale = child_rank(s, 2);
  ASSERT_FALSE(stale);
  EXPECT_EQ(stale.error().code, ErrorCode::kPeerFailed);
  EXPECT_NE(stale.error().message.find("communicator rank 2 was excluded at membership epoch 4"),
            std::string::npos)
      << stale.error().message;
}

TEST(ShrinkRanks, RefusesWhatCannotBeShrunkNamingIt) {
  const CommRankMap map{0, 1, 2};
  const auto message = [&](std::vector<std::int32_t> gone, std::int32_t me) {
    return shrink_ranks(map, 3, gone, me, 1).error().message;
  };
  EXPECT_NE(message({5}, 0).find("gone rank 5 is not in the plan"), std::string::npos);
  EXPECT_NE(message({0}, 0).find("communicator rank 0) runs a gone rank"), std::string::npos);
  const auto once = shrink_ranks(map, 3, std::vector<std::int32_t>{1}, 0, 2).value();
  EXPECT_NE(shrink_ranks(once.comm_rank_of, 2, std::vector<std::int32_t>{1}, 0, 3)
                .error()
                .message.find("plan rank 1 is gone already"),
            std::string::npos);
  EXPECT_NE(shrink_ranks(CommRankMap{0, 7}, 3, {}, 0, 1)
                .error()
                .message.find("plan rank 1 runs on communicator rank 7"),
            std::string::npos);
}

}  // namespace
}  // namespace refit::nccl_detail
