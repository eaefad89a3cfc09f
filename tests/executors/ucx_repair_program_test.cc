// A repair step's program over what the full plan registered (executors/ucx/src/repair_program.h):
// it can register nothing new, so where it would pack or unpack with no staging registered it
// moves every chunk in place, and an elastic prepare keeps a receive slot for what it unpacks.
//
// w [64, 96] bf16 on rank 0 (whole, R), needed whole by rank 1: the full plan moves it in one run
// on each side and registers no staging.
#include <gtest/gtest.h>

#include "refit/executors/host_shards.h"
#include "refit/planner/strategy.h"
#include "repair_program.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit::ucx_detail {
namespace {

const Shape kShape{64, 96};
constexpr Bytes kStaging{1 << 20};

ReshardProblem one_to_one() {
  using testing::make_layout;
  using testing::rank_range;
  return ReshardProblem::make(
             {testing::make_reshard("w", kShape, make_layout(kShape, {1}, rank_range(0, 1), "R"),
                                    make_layout(kShape, {1}, rank_range(1, 1), "R"))},
             1, 1)
      .value();
}

UcxProgram program_of(const Plan& plan, Rank rank, const RankBuffers& buffers) {
  auto lowered = std::make_unique<lowering::LoweredPlan>(lowering::LoweredPlan::make(plan, kStaging).value());
  return make_ucx_program(std::move(lowered), rank, buffers).value();
}

// Columns 0..1 of every row from rank 0 to rank 1: 64 runs of 4 bytes on each side, which the UCX
// executor's own rule packs and unpacks (too many short runs).
Plan two_columns(const Plan& full) {
  Plan out = full.without_transfers();
  const Segment columns{.tensor = 0, .box = Box{.offset = {0, 0}, .extent = {64, 2}}};
  out.transfers.push_back(Transfer{.id = 0,
                                   .sender = Rank{0},
                                   .receiver = Rank{1},
                                   .link = LinkKind::kNetwork,
                                   .segments = {columns},
                                   .bytes = full.segment_bytes(columns),
                                   .chunk = Bytes{1 << 16}});
  return out;
}

TEST(UcxRepairProgram, ChunksThatWouldNeedStagingNoneRegisteredMoveInPlace) {
  const auto problem = one_to_one();
  const auto full = make_plan("direct", problem, testing::make_test_cluster(2, 1, 1, 1)).value();
  const auto repair = two_columns(full);
  for (const Rank rank : {Rank{0}, Rank{1}}) {
    auto shards = HostShards::allocate(problem, rank);
    const auto prepared = program_of(full, rank, shards.buffers());
    ASSERT_EQ(prepared.send_staging.slots + prepared.receive_staging.slots, 0) << "rank " << rank.value;
    // Under the executor's rule the repair packs (rank 0) or unpacks (rank 1) its one chunk.
    const auto own_rule = program_of(repair, rank, shards.buffers());
    EXPECT_EQ(own_rule.send_staging.slots + own_rule.receive_staging.slots, 1) << "rank " << rank.value;
    const auto program = make_repair_program(repair, rank, shards.buffers(), prepared, kStaging);
    ASSERT_TRUE(program) << program.error().message;
    EXPECT_EQ(program->send_staging.slots + program->receive_staging.slots, 0) << "rank " << rank.value;
    for (const auto& s : program->sends())
      for (const auto& c : s.chunks) EXPECT_EQ(c.path, lowering::CopyPath::kInPlace);
    for (const auto& r : program->receives())
      for (const auto& c : r.chunks) EXPECT_EQ(c.path, lowering::CopyPath::kInPlace);
  }
}

TEST(UcxRepairProgram, AnElasticPrepareKeepsAReceiveSlotOfTheLargestChunkItReceives) {
  // Rank 1 receives w in one chunk of 64 x 96 x 2 = 12288 bytes; nothing is unpacked, yet a slot
  // of 12288 bytes is kept for a repair that re-sends it what it relayed.
  const auto problem = one_to_one();
  const auto full = make_plan("direct", problem, testing::make_test_cluster(2, 1, 1, 1)).value();
  auto shards = HostShards::allocate(problem, Rank{1});
  auto prepared = program_of(full, Rank{1}, shards.buffers());
  EXPECT_EQ(prepared.regions[prepared.receive_staging_region].bytes, 0);
  reserve_repair_staging(prepared);
  EXPECT_EQ(prepared.regions[prepared.receive_staging_region].bytes, 64 * 96 * 2);
}

}  // namespace
}  // namespace refit::ucx_detail
