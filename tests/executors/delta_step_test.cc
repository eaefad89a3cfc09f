// A delta refit's rounds and hops (executors' delta_schedule.h), which the executor runs and the
// prediction sums, and a relayed hop's step as the simulator takes it (delta_step_job).
#include <gtest/gtest.h>

#include "refit/executors/delta_schedule.h"
#include "refit/executors/delta_step.h"
#include "test_cluster.h"

namespace refit {
namespace {

// 2 training ranks (0, 1) -> 3 inference ranks (2, 3, 4) of one tensor w [8, 256] bf16 (4 KiB),
// replicated at the inference ranks: rank 0 sends it to relay 2, which forwards it to relay 3,
// which forwards rows [4, 8) to rank 4; rank 1 sends rows [0, 4) to rank 4 directly.
Plan chain_plan() {
  Plan plan;
  plan.tensors = {make_tensor_spec("w", {8, 256}, DType::kBF16).value()};
  plan.source_ranks = 2;
  plan.destination_ranks = 3;
  const Box all{{0, 0}, {8, 256}};
  const auto transfer = [&](std::int32_t id, std::int32_t from, std::int32_t to, LinkKind link, Box box,
                            std::int32_t via) {
    const auto bytes = Bytes{box.volume() * 2};
    return Transfer{.id = id,
                    .sender = Rank{from},
                    .receiver = Rank{to},
                    .link = link,
                    .segments = {Segment{.tensor = 0, .box = std::move(box), .via = via}},
                    .bytes = bytes,
                    .chunk = bytes};
  };
  plan.transfers = {transfer(0, 0, 2, LinkKind::kNetwork, all, kFromSourceShard),
                    transfer(1, 2, 3, LinkKind::kNvlink, all, 0),
                    transfer(2, 1, 4, LinkKind::kNetwork, Box{{0, 0}, {4, 256}}, kFromSourceShard),
                    transfer(3, 3, 4, LinkKind::kNetwork, Box{{4, 0}, {4, 256}}, 1)};
  return plan;
}

// Pieces 0-3 are t0-t3's segments. t0 and t2 leave source shards: round 0, hop 0, each piece its
// own origin. t1 forwards t0's whole box as it arrived: round 0, hop 1, carrying piece 0's payload.
// t3 forwards rows [4, 8) of t1's box, part of a box: relay 3 decodes and encodes again, in round 1
// (hop 0), a piece of its own. So round 0 has 2 hops and round 1 one.
TEST(DeltaSchedule, RelaysForwardWholeBoxesAsTheyArrivedAndEncodePartsAgainInTheNextRound) {
  const auto schedule = delta_schedule(chain_plan());
  EXPECT_EQ(schedule.round, (std::vector<std::int32_t>{0, 0, 0, 1}));
  EXPECT_EQ(schedule.hop, (std::vector<std::int32_t>{0, 1, 0, 0}));
  EXPECT_EQ(schedule.origin, (std::vector<std::int32_t>{0, 0, 2, 3}));
  EXPECT_EQ(schedule.forwards, (std::vector<std::int32_t>{-1, 0, -1, -1}));
  EXPECT_EQ(schedule.hops, (std::vector<std::int32_t>{2, 1}));
  EXPECT_EQ(delta_schedule(Plan{}).rounds(), 0);
}

// A chain of forwards: t1 forwards t0's box, t2 forwards t1's, so t2 moves in hop 2 of round 0
// and carries piece 0's payload (forwarding the piece it arrived as, 1). Hop payloads keep the
// sizes of the hop's pieces alone: sizes {10, 20, 30} give {10, 0, 0}, {0, 20, 0}, {0, 0, 30}.
TEST(DeltaSchedule, AChainOfForwardsCarriesTheFirstSendersPayloadHopByHop) {
  auto plan = chain_plan();
  plan.transfers.resize(2);
  auto t2 = plan.transfers[1];
  t2.id = 2;
  t2.sender = Rank{3};
  t2.receiver = Rank{4};
  t2.segments.front().via = 1;
  plan.transfers.push_back(t2);
  const auto schedule = delta_schedule(plan);
  EXPECT_EQ(schedule.hop, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(schedule.origin, (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(schedule.forwards, (std::vector<std::int32_t>{-1, 0, 1}));
  EXPECT_EQ(schedule.hops, (std::vector<std::int32_t>{3}));
  const std::vector<std::int64_t> sizes{10, 20, 30};
  EXPECT_EQ(hop_payloads(plan, schedule, sizes, 0, 0), (std::vector<std::int64_t>{10, 0, 0}));
  EXPECT_EQ(hop_payloads(plan, schedule, sizes, 0, 1), (std::vector<std::int64_t>{0, 20, 0}));
  EXPECT_EQ(hop_payloads(plan, schedule, sizes, 0, 2), (std::vector<std::int64_t>{0, 0, 30}));
  EXPECT_EQ(hop_payloads(plan, schedule, sizes, 1, 0), (std::vector<std::int64_t>{0, 0, 0}));
}

// A landing rank's quantize step (t1: rank 2 to itself, making the fp8 of the box t0 brought) and
// the relay that forwards that fp8 (t2) are never forwards as they arrived: the quantize step
// runs on the copy t0's round decoded (round 1), and what it makes was never a payload, so t2
// encodes it in round 2.
TEST(DeltaSchedule, TheFp8AQuantizeStepMadeIsEncodedInTheRoundAfterIt) {
  auto plan = chain_plan();
  plan.tensors.push_back(make_tensor_spec("w fp8", {8, 256}, DType::kFP8E4M3).value());
  plan.transfers.resize(1);
  auto quantize = plan.transfers[0];
  quantize.id = 1;
  quantize.sender = quantize.receiver = Rank{2};
  quantize.link = LinkKind::kLocal;
  quantize.segments.front() = Segment{.tensor = 1, .box = Box{{0, 0}, {8, 256}}, .via = 0};
  auto forward = quantize;
  forward.id = 2;
  forward.receiver = Rank{3};
  forward.link = LinkKind::kNvlink;
  forward.segments.front().via = 1;
  plan.transfers.push_back(quantize);
  plan.transfers.push_back(forward);
  const auto schedule = delta_schedule(plan);
  EXPECT_EQ(schedule.round, (std::vector<std::int32_t>{0, 1, 2}));
  EXPECT_EQ(schedule.hop, (std::vector<std::int32_t>{0, 0, 0}));
  EXPECT_EQ(schedule.forwards, (std::vector<std::int32_t>{-1, -1, -1}));
}

// Hop 1's step: relay 2 forwards 100 bytes of payload to rank 3. Relay 2 sends as the step's rank
// 2, a training rank after the job's two, on relay 2's GPU; the inference ranks move up by one
// (3 -> 4), on their own GPUs. The payload tensor lies whole at its sender and whole at its
// receiver. Hop 0's step, which training ranks send, keeps the job's ranks.
TEST(DeltaStep, ARelayedRoundSendsFromATrainingRankOfItsOwnOnTheRelaysGpu) {
  const auto plan = chain_plan();
  const auto cluster = testing::make_test_cluster(3, 2, 2, 3);  // ranks 0..4 on GPUs 0..4
  const auto step = delta_step(plan, std::vector<std::int64_t>{0, 100, 0, 0}).value();
  const auto job = delta_step_job(step, cluster).value();
  EXPECT_EQ(job.plan.source_ranks, 3);
  EXPECT_EQ(job.plan.destination_ranks, 3);
  ASSERT_EQ(job.plan.transfers.size(), 1U);
  const auto& t = job.plan.transfers.front();
  EXPECT_EQ(t.sender, Rank{2});
  EXPECT_EQ(t.receiver, Rank{4});
  EXPECT_EQ(t.bytes, Bytes{100});
  EXPECT_EQ(t.link, LinkKind::kNvlink);
  EXPECT_EQ(job.cluster.gpu_of(Rank{2}), cluster.gpu_of(Rank{2}));  // the relay's GPU
  EXPECT_EQ(job.cluster.gpu_of(Rank{3}), cluster.gpu_of(Rank{2}));  // the relay's inference rank
  EXPECT_EQ(job.cluster.gpu_of(Rank{4}), cluster.gpu_of(Rank{3}));
  const auto& w = job.problem.tensors().front();
  EXPECT_EQ(w.source.mesh().ranks(), std::vector<Rank>{Rank{2}});
  EXPECT_EQ(w.destination.mesh().ranks(), std::vector<Rank>{Rank{4}});

  const auto first = delta_step(plan, std::vector<std::int64_t>{50, 0, 30, 0}).value();
  const auto kept = delta_step_job(first, cluster).value();
  EXPECT_EQ(kept.plan, first.plan);
  EXPECT_EQ(kept.cluster.ranks(), cluster.ranks());
}

}  // namespace
}  // namespace refit
