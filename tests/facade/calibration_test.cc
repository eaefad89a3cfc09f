// Calibration's arithmetic: the line fitted to one pair's transfers, and the cluster made of it,
// which must predict the very transfers it was calibrated on (a one-message transfer of one pair
// takes latency + bytes / pair bandwidth; every pair at once shares the host's bandwidth).
#include "refit/facade/calibration.h"

#include <random>

#include <gtest/gtest.h>

#include "refit/refit.h"
#include "refit/topology/cluster_json.h"

namespace refit {
namespace {

std::vector<PairMeasurement> on_line(Seconds latency, BytesPerSecond bandwidth,
                                     std::vector<std::int64_t> sizes) {
  std::vector<PairMeasurement> points;
  for (const auto b : sizes)
    points.push_back({.bytes = Bytes{b},
                      .pairs = 1,
                      .seconds = latency + Seconds{static_cast<double>(b) / bandwidth.value}});
  return points;
}

TEST(CalibrationFit, PointsOnALineGiveItBack) {
  // 1000 random lines t = a + b / bw, a in [1, 100] us, bw in [0.5, 50] GB/s, through 2 to 6 sizes
  // from 4 KiB to 256 MiB: the fit returns a and bw to 1e-6 and no residual.
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> latency_us(1, 100), gbps(0.5, 50);
  std::uniform_int_distribution<std::int64_t> size(std::int64_t{4} << 10, std::int64_t{256} << 20);
  for (int trial = 0; trial < 1000; ++trial) {
    const Seconds a{latency_us(rng) * 1e-6};
    const auto bw = BytesPerSecond::from_gbps(gbps(rng));
    std::vector<std::int64_t> sizes{size(rng), size(rng)};
    for (int more = trial % 5; more-- > 0;) sizes.push_back(size(rng));
    if (sizes[0] == sizes[1]) continue;
    const auto fit = fit_line(on_line(a, bw, sizes));
    ASSERT_TRUE(fit) << fit.error().message;
    EXPECT_NEAR(fit->latency.value, a.value, 1e-6 * a.value + 1e-12);
    EXPECT_NEAR(fit->bandwidth.value, bw.value, 1e-6 * bw.value);
    EXPECT_LT(fit->worst_relative_residual, 1e-6);
  }
}

TEST(CalibrationFit, ItNeedsTwoSizesAndATimeThatGrows) {
  EXPECT_FALSE(fit_line(on_line(Seconds{1e-5}, BytesPerSecond{1e9}, {4096, 4096})));
  // 1 MB in 2 ms, 2 MB in 1 ms: no positive bandwidth explains that.
  const std::vector<PairMeasurement> shrinking{
      {.bytes = Bytes{1000000}, .pairs = 1, .seconds = Seconds{2e-3}},
      {.bytes = Bytes{2000000}, .pairs = 1, .seconds = Seconds{1e-3}}};
  const auto fit = fit_line(shrinking);
  ASSERT_FALSE(fit);
  EXPECT_NE(fit.error().message.find("did not grow"), std::string::npos);
}

// 2 training + 2 inference ranks; `pairs` of them each move `bytes` from rank p to rank 2 + p.
ReshardProblem pairs_problem(std::int32_t pairs, std::int64_t bytes) {
  const Shape shape{pairs, bytes / 2};
  std::vector<Rank> from, to;
  for (std::int32_t p = 0; p < pairs; ++p) from.emplace_back(p), to.emplace_back(2 + p);
  auto spec = make_tensor_spec("w", shape, DType::kBF16).value();
  auto src = Layout::make(shape, Mesh::make({pairs}, from).value(), {Placement::shard(0)}).value();
  auto dst = Layout::make(shape, Mesh::make({pairs}, to).value(), {Placement::shard(0)}).value();
  return ReshardProblem::make({{spec, src, dst}}, 2, 2).value();
}

Seconds predicted(const ClusterSpec& spec, std::int32_t pairs, std::int64_t bytes) {
  const auto problem = pairs_problem(pairs, bytes);
  auto cluster = Cluster::make(spec).value();
  auto ranks = RankMap::place(cluster, job_of(problem)).value();
  const auto on = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const auto made = plan(problem, on, "refit", PlanOptions{.chunk = Bytes{bytes}}).value();
  return simulate_plan(made, problem, on).value().predicted;
}

TEST(CalibratedCluster, PredictsTheTransfersItWasCalibratedOn) {
  // Pair: 20 us + bytes / 4 GB/s; host: 6 GB/s (1.5x a pair); memcpy 10 GB/s.
  const LineFit pair{
      .latency = Seconds{20e-6}, .bandwidth = BytesPerSecond::from_gbps(4), .worst_relative_residual = 0};
  const auto spec = calibrated_cluster(4, pair, BytesPerSecond::from_gbps(6), BytesPerSecond::from_gbps(10));
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_EQ(spec->gpus.size(), 4u);
  EXPECT_EQ(spec->domains.size(), 4u);  // a domain per process: no NVLink between them
  ASSERT_EQ(spec->nics.size(), 1u);     // one link of the host's bandwidth serves them all
  EXPECT_DOUBLE_EQ(spec->fabric.oversubscription, 1.5);
  const std::int64_t bytes = 8 << 20;
  // One pair: 20 us + 8 MiB / 4 GB/s = 2117.152 us.
  EXPECT_NEAR(predicted(*spec, 1, bytes).value, 20e-6 + bytes / 4e9, 1e-2 * (bytes / 4e9));
  // Two pairs at once share 6 GB/s: 20 us + 16 MiB / 6 GB/s = 2816.2 us (one pair alone would take
  // 2117 us: each is held to 4 GB/s, both together to 6).
  EXPECT_NEAR(predicted(*spec, 2, bytes).value, 20e-6 + 2.0 * bytes / 6e9, 1e-2 * (2.0 * bytes / 6e9));
}

TEST(CalibratedCluster, NoPredictionBelowItsLowerBound) {
  // The host's one link (6 GB/s) serves every process, each process a domain whose uplink is 6 /
  // 1.5 = 4 GB/s. Two pairs of 8 MiB must leave the two source domains: through the link's 6 GB/s
  // (one link, counted once) and the two uplinks' 8 GB/s, so at least 16 MiB / 6 GB/s = 2796.2 us,
  // below the 2816.2 us predicted. (Dividing the link by the fabric's 1.5 as if it were one
  // domain's NICs gave 16 MiB / 4 GB/s = 4194.3 us, above the prediction.)
  const LineFit pair{
      .latency = Seconds{20e-6}, .bandwidth = BytesPerSecond::from_gbps(4), .worst_relative_residual = 0};
  const auto spec = calibrated_cluster(4, pair, BytesPerSecond::from_gbps(6), BytesPerSecond::from_gbps(10));
  ASSERT_TRUE(spec) << spec.error().message;
  const std::int64_t bytes = 8 << 20;
  const auto problem = pairs_problem(2, bytes);
  auto cluster = Cluster::make(*spec).value();
  auto ranks = RankMap::place(cluster, job_of(problem)).value();
  const auto on = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const auto bound = lower_bound(problem, on);
  EXPECT_NEAR(bound.source_side.value, 2.0 * bytes / 6e9, 1e-12);
  EXPECT_LE(bound.time.value, predicted(*spec, 2, bytes).value);
}

TEST(CalibratedCluster, EveryProcessQuantizesAtTheMeasuredRateWhichItsFileKeeps) {
  const LineFit pair{
      .latency = Seconds{20e-6}, .bandwidth = BytesPerSecond::from_gbps(4), .worst_relative_residual = 0};
  const auto spec = calibrated_cluster(4, pair, BytesPerSecond::from_gbps(6), BytesPerSecond::from_gbps(10),
                                       BytesPerSecond::from_gbps(1.25));
  ASSERT_TRUE(spec) << spec.error().message;
  for (const auto& g : spec->gpus) EXPECT_DOUBLE_EQ(g.quantize_bandwidth.gbps(), 1.25);
  const auto read = cluster_from_json(cluster_to_json(Cluster::make(*spec).value()));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->cluster.spec().gpus, spec->gpus);
}

TEST(CalibratedCluster, AHostNoFasterThanOnePairIsNotOversubscribed) {
  const LineFit pair{
      .latency = Seconds{1e-5}, .bandwidth = BytesPerSecond::from_gbps(4), .worst_relative_residual = 0};
  const auto spec = calibrated_cluster(2, pair, BytesPerSecond::from_gbps(3), BytesPerSecond::from_gbps(10));
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_DOUBLE_EQ(spec->fabric.oversubscription, 1.0);
  EXPECT_DOUBLE_EQ(spec->nics[0].bandwidth.value, 4e9);
  EXPECT_FALSE(calibrated_cluster(0, pair, BytesPerSecond::from_gbps(3), BytesPerSecond::from_gbps(10)));
}

}  // namespace
}  // namespace refit
