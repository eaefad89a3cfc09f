// A rank's program: which chunks move without a copy, which are staged or kept in scratch, and
// which received chunks a forwarded chunk waits for.
#include <gtest/gtest.h>

#include "rank_program.h"
#include "refit/executors/host_shards.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::ucx_detail {
namespace {

constexpr Bytes kStaging{1 << 20};

ReshardProblem one_tensor(Shape shape, const char* src, std::int64_t src_ranks, const char* dst,
                          std::int64_t dst_ranks) {
  const auto s = static_cast<std::int32_t>(src_ranks);
  const auto d = static_cast<std::int32_t>(dst_ranks);
  return ReshardProblem::make(
             {testing::make_reshard(
                 "w", shape, testing::make_layout(shape, {src_ranks}, testing::rank_range(0, s), src),
                 testing::make_layout(shape, {dst_ranks}, testing::rank_range(s, d), dst), DType::kFP32)},
             s, d)
      .value();
}

struct Programs {
  Plan plan;
  std::vector<HostShards> shards;
  std::vector<RankProgram> programs;
};

Programs programs_for(const ReshardProblem& p, const Cluster& c, std::string_view strategy, Bytes chunk) {
  Programs out{make_plan(strategy, p, c, PlanOptions{.chunk = chunk}).value(), {}, {}};
  for (std::int32_t r = 0; r < p.world_size(); ++r) {
    out.shards.push_back(HostShards::allocate(p, Rank{r}));
    auto program = make_rank_program(out.plan, Rank{r}, out.shards.back().buffers(), kStaging);
    EXPECT_TRUE(program) << program.error().message;
    out.programs.push_back(std::move(*program));
  }
  return out;
}

// [64, 6] fp32 rows over 2 ranks to rows over 2 ranks: each destination box is one source box,
// 768 contiguous bytes, cut in 256-byte chunks: three direct chunks, one run each, no staging.
TEST(RankProgram, MatchingRowsMoveWithoutCopies) {
  const auto p = programs_for(one_tensor({64, 6}, "S0", 2, "S0", 2), testing::make_test_cluster(1, 4, 2, 2),
                              "direct", Bytes{256});
  const RankProgram& receiver = p.programs[2];
  ASSERT_EQ(receiver.receives.size(), 1u);
  EXPECT_EQ(receiver.receives[0].chunk_count(), 3);
  for (std::size_t c = 0; c < 3; ++c) {
    EXPECT_EQ(receiver.receives[0].landing[c], Landing::kDirect);
    ASSERT_EQ(receiver.receives[0].runs[c].size(), 1u);
    EXPECT_EQ(receiver.receives[0].runs[c][0].length, 256);
  }
  EXPECT_EQ(receiver.receive_staging.slots, 0);
  const RankProgram& sender = p.programs[0];
  ASSERT_EQ(sender.sends.size(), 1u);
  for (const auto& runs : sender.sends[0].runs) EXPECT_EQ(runs.size(), 1u);
  EXPECT_EQ(sender.send_staging.slots, 0);
}

// Rows to columns of [64, 6] fp32: rank 0's piece [0:32, 0:3] is 32 runs of 12 bytes in its
// source box [0:32, 0:6] (more than kMaxRunsPerChunk: packed), and one contiguous block in the
// destination box [0:64, 0:3] (direct).
TEST(RankProgram, StridedPiecesArePackedWhereTheyScatter) {
  const auto p = programs_for(one_tensor({64, 6}, "S0", 2, "S1", 2), testing::make_test_cluster(1, 4, 2, 2),
                              "direct", Bytes{1 << 20});
  const RankProgram& sender = p.programs[0];
  ASSERT_EQ(sender.sends.size(), 2u);
  EXPECT_TRUE(sender.sends[0].runs[0].empty());
  EXPECT_EQ(sender.send_staging.slots, 2);
  EXPECT_EQ(sender.send_staging.slot_bytes, 32 * 3 * 4);
  const RankProgram& receiver = p.programs[2];
  ASSERT_EQ(receiver.receives.size(), 2u);
  EXPECT_EQ(receiver.receives[0].landing[0], Landing::kDirect);
}

// Columns to rows: the receiver's piece [0:32, 0:3] scatters over 32 rows of its box
// [0:32, 0:6]: staged, while the sender reads it contiguously.
TEST(RankProgram, StridedLandingsAreStaged) {
  const auto p = programs_for(one_tensor({64, 6}, "S1", 2, "S0", 2), testing::make_test_cluster(1, 4, 2, 2),
                              "direct", Bytes{1 << 20});
  const RankProgram& receiver = p.programs[2];
  EXPECT_EQ(receiver.receives[0].landing[0], Landing::kStaged);
  EXPECT_EQ(receiver.receive_staging.slots, 2);
  EXPECT_FALSE(p.programs[0].sends[0].runs[0].empty());
}

// Columns to rows of [64, 2048] fp32: the receiver's piece [0:32, 0:1024] is 32 runs of 4 KiB in
// its box [0:32, 0:2048]: more than kMaxRunsPerChunk runs, but each a page long (the mean is
// kMinMeanRunBytes), so one put per run beats packing and unpacking: no staging on either side.
TEST(RankProgram, ManyPageLongRunsMoveWithoutCopies) {
  const auto p = programs_for(one_tensor({64, 2048}, "S1", 2, "S0", 2),
                              testing::make_test_cluster(1, 4, 2, 2), "direct", Bytes{1 << 20});
  const RankProgram& receiver = p.programs[2];
  ASSERT_EQ(receiver.receives.size(), 2u);
  EXPECT_EQ(receiver.receives[0].landing[0], Landing::kDirect);
  ASSERT_EQ(receiver.receives[0].runs[0].size(), 32u);
  EXPECT_EQ(receiver.receives[0].runs[0][0].length, 1024 * 4);
  EXPECT_EQ(receiver.receive_staging.slots, 0);
}

// gather-broadcast: inference ranks forward whole tensors around the ring although they keep only
// their slice, so what they forward lands whole in scratch.
TEST(RankProgram, ForwardedDataOutsideTheDestinationBoxLandsInScratch) {
  const auto p = programs_for(one_tensor({64, 6}, "S0", 2, "S0", 3), testing::make_test_cluster(1, 5, 2, 3),
                              "gather-broadcast", Bytes{256});
  std::int32_t kept = 0;
  for (const auto& program : p.programs)
    for (const auto& r : program.receives)
      if (r.scratch_offset >= 0) {
        ++kept;
        for (const auto l : r.landing) EXPECT_EQ(l, Landing::kScratch);
      }
  EXPECT_GT(kept, 0);
}

// refit on 2 nodes of 2: each piece lands once on node 1 and is relayed to the other inference
// rank with the same boxes in the same order, so relay chunk c waits for exactly c+1 chunks.
TEST(RankProgram, RelayChunksWaitOnlyForTheBytesTheyCarry) {
  const auto p = programs_for(one_tensor({64, 6}, "S0", 2, "R", 2), testing::make_test_cluster(2, 2, 2, 2),
                              "refit", Bytes{128});
  std::int32_t relays = 0;
  for (std::int32_t r : {2, 3})
    for (const auto& s : p.programs[static_cast<std::size_t>(r)].sends) {
      ++relays;
      for (std::int64_t c = 0; c < s.chunk_count(); ++c) {
        ASSERT_EQ(s.waits[static_cast<std::size_t>(c)].size(), 1u);
        EXPECT_EQ(s.waits[static_cast<std::size_t>(c)][0].chunks, c + 1);
      }
    }
  EXPECT_GT(relays, 0);
}

TEST(RankProgram, RefusesASenderWithoutTheDataItSends) {
  const auto problem = one_tensor({64, 6}, "S0", 2, "S0", 2);
  const auto plan = make_plan("direct", problem, testing::make_test_cluster(1, 4, 2, 2)).value();
  RankBuffers none;
  const auto r = make_rank_program(plan, Rank{0}, none, kStaging);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("tensor 'w'"), std::string::npos) << r.error().message;
  EXPECT_NE(r.error().message.find("no source buffer"), std::string::npos) << r.error().message;
}

TEST(RankProgram, RefusesAStagingBudgetBelowOneChunk) {
  const auto problem = one_tensor({64, 6}, "S1", 2, "S0", 2);
  const auto plan = make_plan("direct", problem, testing::make_test_cluster(1, 4, 2, 2)).value();
  const auto shards = HostShards::allocate(problem, Rank{2});
  const auto r = make_rank_program(plan, Rank{2}, shards.buffers(), Bytes{100});
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("staging of 100 bytes cannot hold one chunk of 384 bytes"),
            std::string::npos)
      << r.error().message;
}

}  // namespace
}  // namespace refit::ucx_detail
