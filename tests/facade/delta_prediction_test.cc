// A delta refit's step predicted beside the dense refit (PredictOptions::delta): what it moves
// shrinks with the change fraction, its parts add up round by round, and plans the delta executor
// does not take get a note instead of a number.
#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "refit/core/quantized_problem.h"
#include "refit/delta/codec_speed.h"
#include "refit/delta/payload_estimate.h"
#include "refit/facade/cluster_source.h"
#include "refit/facade/prediction.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";
const ProblemSource kSource{
    .model = kModels + "tiny-qwen3-moe.json", .train = "tp=2,ep=2,etp=1", .infer = "tp=2,dp=2"};

Predictions predicted(const PredictOptions& options, bool compare_all = false) {
  const auto problem = load_problem(kSource).value();
  const auto placed = load_cluster({.preset = "dgx-h100:gpus_per_node=2"}, job_of(problem)).value().placed;
  const PredictionInputs in{.source = kSource, .problem = problem, .cluster = placed};
  return (compare_all ? compare(in, options) : predict(in, options)).value();
}

TEST(DeltaPrediction, MovesLessThanDenseAndMoreAsMoreChanges) {
  Bytes previous{0};
  std::optional<Bytes> dense;
  for (const double f : {0.001, 0.01, 0.1, 1.0}) {
    SCOPED_TRACE(f);
    const auto p = predicted({.strategy = "direct", .deployment = "refit", .delta = f});
    const auto& row = p.rows.front();
    ASSERT_TRUE(row.delta);
    const auto& d = *row.delta;
    EXPECT_GT(d.dense_bytes, Bytes{0});
    if (dense) EXPECT_EQ(d.dense_bytes, *dense);
    dense = d.dense_bytes;
    EXPECT_GT(d.moved_bytes, previous);
    previous = d.moved_bytes;
    // At 10 % changed the codec's payloads are about 5 % (bf16) and 8 % (fp32) of dense
    // (bench/RESULTS.md), headers aside.
    if (f <= 0.1) EXPECT_LT(d.moved_bytes.value * 5, d.dense_bytes.value);
    EXPECT_DOUBLE_EQ(d.predicted.value, (d.encode + d.transfer + d.decode).value);
    EXPECT_GT(d.encode.value, 0.0);
    EXPECT_GT(d.decode.value, 0.0);
  }
}

// Nothing changed: no piece sends anything, so no transfer; the scans still cost their pass.
TEST(DeltaPrediction, NothingChangedMovesNothing) {
  const auto p = predicted({.strategy = "direct", .deployment = "refit", .delta = 0.0});
  const auto& d = *p.rows.front().delta;
  EXPECT_EQ(d.moved_bytes, Bytes{0});
  EXPECT_EQ(d.transfer.value, 0.0);
  EXPECT_GT(d.encode.value, 0.0);
}

// --compare: every row refit's executors run gets a delta prediction, refit's own plan (which
// relays over NVLink, in hops) included, or a note that says why not; the deployed baselines
// neither.
TEST(DeltaPrediction, CompareGivesEveryRowOfRefitsExecutorsADeltaOrANote) {
  const auto p = predicted({.delta = 0.02}, /*compare_all=*/true);
  int with_delta = 0;
  bool refit_relays = false;
  for (const auto& r : p.rows) {
    SCOPED_TRACE(r.strategy + " as " + std::string(r.deployment->name));
    const bool noted =
        std::ranges::any_of(r.notes, [](const std::string& n) { return n.starts_with("--delta"); });
    if (r.deployment->id != DeploymentId::kRefit) {
      EXPECT_FALSE(r.delta);
      continue;
    }
    EXPECT_TRUE(noted);
    with_delta += r.delta ? 1 : 0;
    if (r.strategy == "refit") {
      ASSERT_TRUE(r.delta);
      refit_relays = r.delta->rounds.front().hops > 1;
    }
  }
  EXPECT_GE(with_delta, 2);
  EXPECT_TRUE(refit_relays);
}

// A relayed plan by hand: training ranks 0, 1 on node 0 -> inference ranks 2, 3 on node 1 (test
// cluster: 50 GB/s NICs, 400 GB/s NVLink), w [1024, 1024] bf16 (2 MiB) replicated on both sides.
// Rank 0 sends w to rank 2 over the network (t0, hop 0), and rank 2 forwards the whole box to rank
// 3 over NVLink (t1, hop 1), its payload as it arrived: one round of the codec. At 2 % changed
// each piece's payload is P = the estimate of a 2 MiB bf16 piece, so
//   hop 0: moves P, 0 -> 2, transfer_0 >= P / 50 GB/s;
//   hop 1: moves P, 2 -> 3, transfer_1 >= P / 400 GB/s;
//   encode = 2 MiB / encode speed (rank 0 alone: the relay encodes nothing);
//   decode = 2 MiB / audit speed + 2 MiB / decode speed (ranks 2 and 3 each, side by side);
//   step = encode + transfer_0 + transfer_1 + decode, moving 2 P of the plan's 4 MiB. Before
//   relays forwarded payloads as they arrived, the relay decoded, encoded again and its receiver
//   decoded in a second round: 2 encode + 2 decode.
TEST(DeltaPrediction, TextbookRelayHops) {
  const Shape shape{1024, 1024};
  std::vector<TensorReshard> tensors;
  tensors.push_back(testing::make_reshard("w", shape,
                                          testing::make_layout(shape, {2}, testing::rank_range(0, 2), "R"),
                                          testing::make_layout(shape, {2}, testing::rank_range(2, 2), "R")));
  const auto problem = ReshardProblem::make(std::move(tensors), 2, 2).value();
  const auto cluster = testing::make_test_cluster(2, 2, 2, 2);
  const Bytes mib2{2 * 1024 * 1024};
  const Box all = Box::whole(shape);
  Plan plan{.strategy = "refit",
            .execution = ExecutionModelId::kRefitUcx,
            .tensors = {problem.tensors().front().tensor},
            .source_ranks = 2,
            .destination_ranks = 2,
            .transfers = {}};
  plan.transfers = {Transfer{.id = 0,
                             .sender = Rank{0},
                             .receiver = Rank{2},
                             .link = LinkKind::kNetwork,
                             .segments = {Segment{.tensor = 0, .box = all}},
                             .bytes = mib2,
                             .chunk = mib2},
                    Transfer{.id = 1,
                             .sender = Rank{2},
                             .receiver = Rank{3},
                             .link = LinkKind::kNvlink,
                             .segments = {Segment{.tensor = 0, .box = all, .via = 0}},
                             .bytes = mib2,
                             .chunk = mib2}};
  const ProblemSource none;
  const auto p =
      predict({.source = none, .problem = problem, .cluster = cluster}, {.delta = 0.02}, plan).value();
  ASSERT_TRUE(p.rows.front().delta);
  const auto& d = *p.rows.front().delta;

  const auto payload = std::llround(DeltaPayloadEstimate::measure({.change_fraction = 0.02})
                                        .value()
                                        .expected_bytes(mib2.value, problem.tensors().front().tensor)
                                        .value());
  const auto speed = delta_cpu_codec_speed(0.02);
  const Seconds encode = transfer_time(mib2, speed.encode);
  const Seconds decode = transfer_time(mib2, speed.audit) + transfer_time(mib2, speed.decode);
  ASSERT_EQ(d.rounds.size(), 1U);
  const auto& round = d.rounds.front();
  EXPECT_EQ(round.hops, 2);
  EXPECT_EQ(round.moved_bytes, Bytes{2 * payload});
  EXPECT_DOUBLE_EQ(round.encode.value, encode.value);
  EXPECT_DOUBLE_EQ(round.decode.value, decode.value);
  // The hops one after another.
  EXPECT_GE(round.transfer.value, payload / 50e9 + payload / 400e9);
  EXPECT_EQ(d.dense_bytes, Bytes{2 * mib2.value});
  EXPECT_EQ(d.moved_bytes, Bytes{2 * payload});
  EXPECT_DOUBLE_EQ(d.encode.value, encode.value);
  EXPECT_DOUBLE_EQ(d.decode.value, decode.value);
  EXPECT_DOUBLE_EQ(d.transfer.value, round.transfer.value);
  EXPECT_DOUBLE_EQ(d.predicted.value, (d.encode + d.transfer + d.decode).value);
}

// FP8 in flight by hand: w [1024, 1024] bf16 replicated on training ranks 0, 1 and on inference
// ranks 2, 3, quantized at the senders (fp8-block128): the plan moves its fp8 values v (1 MiB) and
// its scales s ([8, 8] fp32, 256 bytes), 0 -> 2 and 1 -> 3, one round. At 2 % changed each
// sender first quantizes its 2 MiB of bf16 at the CPU quantizer's speed Q, then encodes v at the
// codec's speed at v's changed share p_v and s at p_s (the estimate's samples); each receiver
// audits and decodes them at those shares. So, with E the estimate of a piece,
//   moved  = 2 (E(v) + E(s));
//   encode = 2 MiB / Q + 1 MiB / encode(p_v) + 256 / encode(p_s);
//   decode = 1 MiB / audit + 1 MiB / decode(p_v) + 256 / audit + 256 / decode(p_s).
TEST(DeltaPrediction, FP8AtTheSendersQuantizesThenEncodesAtTheShareOfFp8ThatChanged) {
  const Shape shape{1024, 1024};
  std::vector<TensorReshard> tensors;
  tensors.push_back(testing::make_reshard("w", shape,
                                          testing::make_layout(shape, {2}, testing::rank_range(0, 2), "R"),
                                          testing::make_layout(shape, {2}, testing::rank_range(2, 2), "R")));
  const auto problem = quantize_problem(ReshardProblem::make(std::move(tensors), 2, 2).value(),
                                        {.scheme = QuantScheme::kFp8Block128, .site = QuantSite::kSender},
                                        [](const TensorSpec&) { return true; })
                           .value();
  const auto cluster = testing::make_test_cluster(2, 2, 2, 2);
  const Bytes v{1024 * 1024}, s{256};
  Plan plan{.strategy = "direct",
            .execution = ExecutionModelId::kRefitUcx,
            .tensors = {problem.tensors()[0].tensor, problem.tensors()[1].tensor},
            .source_ranks = 2,
            .destination_ranks = 2,
            .transfers = {}};
  for (const std::int32_t r : {0, 1})
    plan.transfers.push_back(Transfer{.id = r,
                                      .sender = Rank{r},
                                      .receiver = Rank{r + 2},
                                      .link = LinkKind::kNetwork,
                                      .segments = {Segment{.tensor = 0, .box = Box::whole(shape)},
                                                   Segment{.tensor = 1, .box = Box::whole({8, 8})}},
                                      .bytes = v + s,
                                      .chunk = v + s});
  const ProblemSource none;
  const auto p =
      predict({.source = none, .problem = problem, .cluster = cluster}, {.delta = 0.02}, plan).value();
  ASSERT_TRUE(p.rows.front().delta);
  const auto& d = *p.rows.front().delta;

  const auto estimate =
      DeltaPayloadEstimate::measure({.change_fraction = 0.02}, std::array{QuantScheme::kFp8Block128}).value();
  const auto& values = plan.tensors[0];
  const auto& scales = plan.tensors[1];
  const auto payload = std::llround(estimate.expected_bytes(v.value, values).value()) +
                       std::llround(estimate.expected_bytes(s.value, scales).value());
  const auto at_v = delta_cpu_codec_speed(estimate.sample(values).value().changed_share);
  const auto at_s = delta_cpu_codec_speed(estimate.sample(scales).value().changed_share);
  const Seconds encode = transfer_time(Bytes{2 * v.value}, at_v.quantize) + transfer_time(v, at_v.encode) +
                         transfer_time(s, at_s.encode);
  const Seconds decode = transfer_time(v, at_v.audit) + transfer_time(v, at_v.decode) +
                         transfer_time(s, at_s.audit) + transfer_time(s, at_s.decode);
  ASSERT_EQ(d.rounds.size(), 1U);
  EXPECT_EQ(d.moved_bytes, Bytes{2 * payload});
  EXPECT_DOUBLE_EQ(d.encode.value, encode.value);
  EXPECT_DOUBLE_EQ(d.decode.value, decode.value);
  // Few fp8 values change: the payload is under the bf16 prediction's 2 % of the weight's bf16.
  EXPECT_LT(payload, std::llround(0.02 * 2 * static_cast<double>(v.value)));
}

TEST(DeltaPrediction, AFractionOutsideZeroToOneIsRefusedNamingTheOption) {
  const auto problem = load_problem(kSource).value();
  const auto placed = load_cluster({.preset = "dgx-h100:gpus_per_node=2"}, job_of(problem)).value().placed;
  const auto p = predict({.source = kSource, .problem = problem, .cluster = placed}, {.delta = 1.5});
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("--delta"), std::string::npos);
}

}  // namespace
}  // namespace refit
