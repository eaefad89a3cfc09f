// What a delta refit re-balances by (executors/src/delta_rebalance.h), against hand-worked sums.
#include <gtest/gtest.h>

#include "delta_rebalance.h"

namespace refit::delta_rebalance {
namespace {

// Two tensors: a [4, 256] bf16 (2 KiB) sent as two pieces of two rows (1 KiB each), and b [128]
// fp32 (512 bytes) sent as one piece.
Plan two_tensor_plan() {
  Plan plan;
  plan.tensors = {make_tensor_spec("a", {4, 256}, DType::kBF16).value(),
                  make_tensor_spec("b", {128}, DType::kFP32).value()};
  plan.source_ranks = 1;
  plan.destination_ranks = 1;
  Transfer t{.id = 0, .sender = Rank{0}, .receiver = Rank{1}};
  t.segments = {Segment{.tensor = 0, .box = Box{{0, 0}, {2, 256}}},
                Segment{.tensor = 0, .box = Box{{2, 0}, {2, 256}}},
                Segment{.tensor = 1, .box = Box{{0}, {128}}}};
  plan.transfers = {t};
  return plan;
}

TEST(DeltaRebalance, DenseBytesAreEachTensorsBytes) {
  const auto dense = dense_bytes(two_tensor_plan());
  ASSERT_EQ(dense.size(), 2u);
  EXPECT_EQ(dense[0], Bytes{2048});
  EXPECT_EQ(dense[1], Bytes{512});
}

TEST(DeltaRebalance, AMeasureCountsOnlyPiecesSentAgainstAnAgreedBaseline) {
  const auto plan = two_tensor_plan();
  const std::vector<Bytes> planned{Bytes{2048}, Bytes{512}};
  // a: its first piece moved 100 of 1024 bytes, its second went dense (1080 bytes, no baseline):
  // only the first counts, 100 / 1024 of 2048 = 200. b moved nothing: 0.
  EXPECT_EQ(
      measured_moved_bytes(plan, std::vector<std::int64_t>{100, 1080, 0}, {false, true, false}, planned),
      (std::vector<Bytes>{Bytes{200}, Bytes{0}}));
  // b went dense and a's pieces moved 10 and 30 of 2048: a 40, b keeps its planned 512.
  EXPECT_EQ(measured_moved_bytes(plan, std::vector<std::int64_t>{10, 30, 568}, {false, false, true}, planned),
            (std::vector<Bytes>{Bytes{40}, Bytes{512}}));
}

// A landing rank's quantize step (rank 1 to itself) makes c [2, 256] fp8 (512 bytes), which goes
// nowhere, and d [256] fp8, which it forwards to rank 2. The step's pieces move nothing and are
// marked dense (the executor sizes them 0). c moves nothing at all: 0, dense or measured, whatever
// was planned. d's
// forward moved 64 of its 256 bytes: 64. And the quantize step sends nothing: the busiest sender
// is rank 1 with d's 64.
TEST(DeltaRebalance, WhatLandingRanksMakeWeighsWhatLeavesThemAndTheirQuantizeStepsSendNothing) {
  Plan plan;
  plan.tensors = {make_tensor_spec("c", {2, 256}, DType::kFP8E4M3).value(),
                  make_tensor_spec("d", {256}, DType::kFP8E4M3).value()};
  plan.source_ranks = 1;
  plan.destination_ranks = 2;
  Transfer step{.id = 0, .sender = Rank{1}, .receiver = Rank{1}};
  step.segments = {Segment{.tensor = 0, .box = Box{{0, 0}, {2, 256}}},
                   Segment{.tensor = 1, .box = Box{{0}, {256}}}};
  Transfer forward{.id = 1, .sender = Rank{1}, .receiver = Rank{2}};
  forward.segments = {Segment{.tensor = 1, .box = Box{{0}, {256}}, .via = 0}};
  plan.transfers = {step, forward};
  // A dense refit moves none of c either.
  EXPECT_EQ(dense_bytes(plan), (std::vector<Bytes>{Bytes{0}, Bytes{256}}));
  const std::vector<Bytes> planned{Bytes{512}, Bytes{256}};
  const auto measured =
      measured_moved_bytes(plan, std::vector<std::int64_t>{0, 0, 64}, {true, true, false}, planned);
  EXPECT_EQ(measured, (std::vector<Bytes>{Bytes{0}, Bytes{64}}));
  EXPECT_EQ(busiest_sender(plan, measured), Bytes{64});
  EXPECT_EQ(busiest_sender(plan, planned), Bytes{256});
}

TEST(DeltaRebalance, ShareDriftIsTheTotalVariationOfTheShares) {
  const std::vector<Bytes> planned{Bytes{2048}, Bytes{512}};  // shares 0.8, 0.2
  // Every tensor moving a hundredth of its bytes: the same shares, no drift.
  EXPECT_DOUBLE_EQ(share_drift(planned, std::vector<Bytes>{Bytes{20}, Bytes{5}}), 0.0);
  // Only b moves: shares 0, 1: 1/2 (|0 - 0.8| + |1 - 0.2|) = 0.8.
  EXPECT_DOUBLE_EQ(share_drift(planned, std::vector<Bytes>{Bytes{0}, Bytes{7}}), 0.8);
  // Half and half: 1/2 (|0.5 - 0.8| + |0.5 - 0.2|) = 0.3.
  EXPECT_DOUBLE_EQ(share_drift(planned, std::vector<Bytes>{Bytes{9}, Bytes{9}}), 0.3);
  // Nothing moves: nothing to balance. Nothing was planned to move but something does: all of it.
  EXPECT_DOUBLE_EQ(share_drift(planned, std::vector<Bytes>{Bytes{0}, Bytes{0}}), 0.0);
  EXPECT_DOUBLE_EQ(share_drift(std::vector<Bytes>{Bytes{0}, Bytes{0}}, planned), 1.0);
}

TEST(DeltaRebalance, TheBusiestSenderWeighsEachSegmentByItsTensorsMovedBytes) {
  // Rank 0 sends a's two halves and b. With a moving 200 of its 2048 bytes and b 512 of 512:
  // 100 + 100 + 512 = 712. Moved bytes of the dense size give the dense 2048 + 512.
  auto plan = two_tensor_plan();
  EXPECT_EQ(busiest_sender(plan, std::vector<Bytes>{Bytes{200}, Bytes{512}}), Bytes{712});
  EXPECT_EQ(busiest_sender(plan, dense_bytes(plan)), Bytes{2560});
  // b's piece sent by rank 1 instead (a rank of the plan's world): rank 0 carries 200, rank 1 512.
  plan.source_ranks = 2;
  const Segment b = plan.transfers[0].segments.back();
  plan.transfers[0].segments.pop_back();
  plan.transfers[0].receiver = Rank{2};
  plan.transfers.push_back(Transfer{.id = 1, .sender = Rank{1}, .receiver = Rank{2}, .segments = {b}});
  EXPECT_EQ(busiest_sender(plan, std::vector<Bytes>{Bytes{200}, Bytes{512}}), Bytes{512});
}

}  // namespace
}  // namespace refit::delta_rebalance
