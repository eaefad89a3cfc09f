// Calibration's arithmetic: latency + transfers x transfer overhead + chunks x chunk overhead +
// bytes / bandwidth fitted to one pair's transfers, and the cluster made of it, which must predict
// the very transfers it was calibrated on (one pair's m transfers in n chunks take latency + m x
// transfer overhead + n x chunk overhead + bytes / pair bandwidth; every pair at once shares the
// host's bandwidth).
#include "refit/facade/calibration.h"

#include <random>

#include <gtest/gtest.h>

#include "refit/facade/prediction.h"
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
    const auto fit = fit_pair(on_line(a, bw, sizes));
    ASSERT_TRUE(fit) << fit.error().message;
    EXPECT_NEAR(fit->latency.value, a.value, 1e-6 * a.value + 1e-12);
    EXPECT_NEAR(fit->bandwidth.value, bw.value, 1e-6 * bw.value);
    EXPECT_LT(fit->worst_relative_residual, 1e-6);
  }
}

// t = a + m t_o + n c + x / bw for each (x, m, n): the sizes in one transfer in chunks of 8 MiB,
// again in 256 KiB, and again as 32 transfers of x / 32 bytes, each in chunks of 8 MiB.
std::vector<PairMeasurement> on_plane(Seconds a, Seconds c, BytesPerSecond bw,
                                      const std::vector<std::int64_t>& sizes,
                                      const std::vector<std::int64_t>& small_chunked,
                                      Seconds t_o = Seconds{0}, const std::vector<std::int64_t>& many = {}) {
  std::vector<PairMeasurement> points;
  const auto add = [&](std::int64_t x, std::int64_t chunk, std::int32_t m) {
    const std::int64_t n = m * ((x / m + chunk - 1) / chunk);
    points.push_back({.bytes = Bytes{x},
                      .pairs = 1,
                      .seconds = a + Seconds{m * t_o.value + static_cast<double>(n) * c.value +
                                             static_cast<double>(x) / bw.value},
                      .chunks = n,
                      .transfers = m});
  };
  for (const auto x : sizes) add(x, std::int64_t{8} << 20, 1);
  for (const auto x : small_chunked) add(x, std::int64_t{256} << 10, 1);
  for (const auto x : many) add(x, std::int64_t{8} << 20, 32);
  return points;
}

TEST(CalibrationFit, PointsOnAPlaneGiveItBack) {
  // 1000 random t = a + n c + x / bw, a in [1, 300] us, c in [0.5, 20] us per chunk, bw in [0.5,
  // 50] GB/s, through the default sizes and 1 or 2 of them again in 256 KiB chunks: the fit returns
  // a, c and bw to 1e-6 and no residual.
  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> latency_us(1, 300), overhead_us(0.5, 20), gbps(0.5, 50);
  const std::vector<std::int64_t> sizes{256 << 10, 1 << 20, 64 << 20, 128 << 20, 256 << 20};
  for (int trial = 0; trial < 1000; ++trial) {
    const Seconds a{latency_us(rng) * 1e-6}, c{overhead_us(rng) * 1e-6};
    const auto bw = BytesPerSecond::from_gbps(gbps(rng));
    std::vector<std::int64_t> again{64 << 20};
    if (trial % 2) again.push_back(128 << 20);
    const auto fit = fit_pair(on_plane(a, c, bw, sizes, again));
    ASSERT_TRUE(fit) << fit.error().message;
    EXPECT_NEAR(fit->latency.value, a.value, 1e-6 * a.value);
    EXPECT_NEAR(fit->chunk_overhead.value, c.value, 1e-6 * c.value);
    EXPECT_NEAR(fit->bandwidth.value, bw.value, 1e-6 * bw.value);
    EXPECT_LT(fit->worst_relative_residual, 1e-6);
  }
}

TEST(CalibrationFit, PointsOnAPlaneThroughTransfersGiveItBack) {
  // 1000 random t = a + m t_o + n c + x / bw, t_o in [1, 50] us per transfer, the rest as above,
  // through the default sizes, 64 MiB again in 256 KiB chunks and 64 MiB (or 64 and 128 MiB) as 32
  // transfers: the fit returns a, t_o, c and bw to 1e-6 and no residual. (Each size in one
  // transfer pays t_o once, so the fitted latency is what remains of the intercept.)
  std::mt19937_64 rng(13);
  std::uniform_real_distribution<double> latency_us(1, 300), transfer_us(1, 50), overhead_us(0.5, 20),
      gbps(0.5, 50);
  const std::vector<std::int64_t> sizes{256 << 10, 1 << 20, 64 << 20, 128 << 20, 256 << 20};
  for (int trial = 0; trial < 1000; ++trial) {
    const Seconds a{latency_us(rng) * 1e-6}, t_o{transfer_us(rng) * 1e-6}, c{overhead_us(rng) * 1e-6};
    const auto bw = BytesPerSecond::from_gbps(gbps(rng));
    std::vector<std::int64_t> many{64 << 20};
    if (trial % 2) many.push_back(128 << 20);
    const auto fit = fit_pair(on_plane(a, c, bw, sizes, {64 << 20}, t_o, many));
    ASSERT_TRUE(fit) << fit.error().message;
    EXPECT_TRUE(fit->transfer_overhead_told);
    EXPECT_NEAR(fit->latency.value, a.value, 1e-6 * a.value);
    EXPECT_NEAR(fit->transfer_overhead.value, t_o.value, 1e-6 * t_o.value);
    EXPECT_NEAR(fit->chunk_overhead.value, c.value, 1e-6 * c.value);
    EXPECT_NEAR(fit->bandwidth.value, bw.value, 1e-6 * bw.value);
    EXPECT_LT(fit->worst_relative_residual, 1e-6);
  }
}

TEST(CalibrationFit, ATransferOverheadThatComesOutNegativeIsTakenAsZero) {
  // 1, 64 and 128 MiB on t = 50 us + x / 10 GB/s in one transfer, and 64 MiB as 32 transfers of
  // 2 MiB 5 % faster: t_o < 0, which no sender has. It is taken as 0 and the line is the sizes'
  // in one transfer: 50 us and 10 GB/s exactly.
  auto points = on_plane(Seconds{50e-6}, Seconds{0}, BytesPerSecond::from_gbps(10),
                         {1 << 20, 64 << 20, 128 << 20}, {}, Seconds{0}, {64 << 20});
  points.back().seconds = points.back().seconds * 0.95;
  const auto fit = fit_pair(points);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_TRUE(fit->transfer_overhead_told);
  EXPECT_EQ(fit->transfer_overhead.value, 0);
  EXPECT_NEAR(fit->latency.value, 50e-6, 1e-9 * 50e-6);
  EXPECT_NEAR(fit->bandwidth.value, 10e9, 1e-9 * 10e9);
  // Without a measurement in many transfers nothing tells it.
  points.pop_back();
  EXPECT_FALSE(fit_pair(points)->transfer_overhead_told);
}

TEST(CalibrationFit, OneChunkSizeCannotTellTheOverheadSoTheLineIsFitted) {
  // Every size cut in 8 MiB only: the chunks follow the bytes, and the fit charges no overhead.
  // The points lie on a + n c + x / bw with c = 10 us, but no size was measured in two chunk
  // counts, so nothing tells c from the bandwidth: the line through them absorbs it.
  const auto fit = fit_pair(on_plane(Seconds{50e-6}, Seconds{10e-6}, BytesPerSecond::from_gbps(10),
                                     {256 << 10, 1 << 20, 64 << 20, 128 << 20, 256 << 20}, {}));
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_EQ(fit->chunk_overhead.value, 0);
  EXPECT_GT(fit->worst_relative_residual, 0);  // the line misses what the chunks add
}

TEST(CalibrationFit, ANegativeOverheadLeavesTheLineOfTheSizesAsRefitCutsThem) {
  // 1, 64 and 128 MiB on t = 50 us + x / 10 GB/s in 8 MiB chunks, and 64 MiB again in 256 chunks
  // 10 % faster: c < 0, which no sender has. Those small chunks measured something else (on a VM,
  // 64 MiB in 256 KiB chunks ran 20 % faster than in 8 MiB ones), and the line is fitted to each
  // size in its fewest chunks, as refit plans it: 50 us and 10 GB/s exactly, no overhead. The
  // line through all four points would come out faster.
  auto points = on_plane(Seconds{50e-6}, Seconds{0}, BytesPerSecond::from_gbps(10),
                         {1 << 20, 64 << 20, 128 << 20}, {64 << 20});
  points.back().seconds = points.back().seconds * 0.9;
  const auto fit = fit_pair(points);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_TRUE(fit->overhead_told);
  EXPECT_EQ(fit->chunk_overhead.value, 0);
  EXPECT_NEAR(fit->latency.value, 50e-6, 1e-9 * 50e-6);
  EXPECT_NEAR(fit->bandwidth.value, 10e9, 1e-9 * 10e9);
  EXPECT_NEAR(fit->worst_relative_residual, 1 / 0.9 - 1, 1e-9);  // the point left out
  auto one_chunk = points;
  for (auto& p : one_chunk) p.chunks = 1;
  const auto through_all = fit_pair(one_chunk);
  ASSERT_TRUE(through_all) << through_all.error().message;
  EXPECT_GT(through_all->bandwidth.value, fit->bandwidth.value);
}

TEST(CalibrationFit, ABandwidthThatIsNotPositiveFallsBackToTheLine) {
  // 1 MiB in 1 chunk 1 ms, 64 MiB in 8 chunks 5 ms, 64 MiB in 256 chunks 200 ms. The overhead is
  // 195 ms / 248 = 786 us a chunk, and less it 64 MiB take 5 - 8 x 0.786 = -1.29 ms against
  // 1 - 0.786 = 0.21 ms for 1 MiB: more bytes in less time, no positive bandwidth. The line through each size
  // in its fewest chunks is fitted instead: 63 MiB more in 4 ms more, 16.5 GB/s.
  const std::vector<PairMeasurement> points{
      {.bytes = Bytes{1 << 20}, .pairs = 1, .seconds = Seconds{1e-3}, .chunks = 1},
      {.bytes = Bytes{64 << 20}, .pairs = 1, .seconds = Seconds{5e-3}, .chunks = 8},
      {.bytes = Bytes{64 << 20}, .pairs = 1, .seconds = Seconds{200e-3}, .chunks = 256}};
  const auto fit = fit_pair(points);
  ASSERT_TRUE(fit) << fit.error().message;
  EXPECT_EQ(fit->chunk_overhead.value, 0);
  EXPECT_NEAR(fit->bandwidth.value, 63.0 * (1 << 20) / 4e-3, 1e-9 * 63.0 * (1 << 20) / 4e-3);
}

TEST(CalibrationFit, ItNeedsTwoSizesInOneTransferAndATimeThatGrows) {
  EXPECT_FALSE(fit_pair(on_line(Seconds{1e-5}, BytesPerSecond{1e9}, {4096, 4096})));
  // Two sizes, but one of them only in many transfers: no line.
  auto many = on_line(Seconds{1e-5}, BytesPerSecond{1e9}, {4096, 8192});
  many.back().transfers = 4;
  const auto one_size = fit_pair(many);
  ASSERT_FALSE(one_size);
  EXPECT_NE(one_size.error().message.find("at least two sizes in one transfer each, got 1"),
            std::string::npos);
  // A measurement of no transfer is refused, naming it.
  auto none = on_line(Seconds{1e-5}, BytesPerSecond{1e9}, {4096, 8192});
  none.back().transfers = 0;
  const auto refused = fit_pair(none);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("8192 bytes in 0 transfers"), std::string::npos);
  // 1 MB in 2 ms, 2 MB in 1 ms: no positive bandwidth explains that.
  const std::vector<PairMeasurement> shrinking{
      {.bytes = Bytes{1000000}, .pairs = 1, .seconds = Seconds{2e-3}},
      {.bytes = Bytes{2000000}, .pairs = 1, .seconds = Seconds{1e-3}}};
  const auto fit = fit_pair(shrinking);
  ASSERT_FALSE(fit);
  EXPECT_NE(fit.error().message.find("did not grow"), std::string::npos);
}

// 2 training + 2 inference ranks; `pairs` of them each move `bytes` from rank p to rank 2 + p, a
// row of each of `tensors` equal tensors.
ReshardProblem pairs_problem(std::int32_t pairs, std::int64_t bytes, std::int32_t tensors = 1) {
  const Shape shape{pairs, bytes / tensors / 2};
  std::vector<Rank> from, to;
  for (std::int32_t p = 0; p < pairs; ++p) from.emplace_back(p), to.emplace_back(2 + p);
  std::vector<TensorReshard> weights;
  for (std::int32_t i = 0; i < tensors; ++i)
    weights.push_back({make_tensor_spec("w" + std::to_string(i), shape, DType::kBF16).value(),
                       Layout::make(shape, Mesh::make({pairs}, from).value(), {Placement::shard(0)}).value(),
                       Layout::make(shape, Mesh::make({pairs}, to).value(), {Placement::shard(0)}).value()});
  return ReshardProblem::make(std::move(weights), 2, 2).value();
}

// Each pair's bytes in chunks of `chunk` (0: one chunk), as `tensors` tensors, which the direct
// strategy sends a transfer each (refit's plan: one transfer a pair).
Seconds predicted(const ClusterSpec& spec, std::int32_t pairs, std::int64_t bytes, std::int64_t chunk = 0,
                  std::int32_t tensors = 1) {
  const auto problem = pairs_problem(pairs, bytes, tensors);
  auto cluster = Cluster::make(spec).value();
  auto ranks = RankMap::place(cluster, job_of(problem)).value();
  const auto on = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const auto made = plan(problem, on, tensors == 1 ? "refit" : "direct",
                         PlanOptions{.chunk = Bytes{chunk > 0 ? chunk : bytes}})
                        .value();
  return simulate_plan(made, problem, on).value().predicted;
}

TEST(CalibratedCluster, PredictsTheTransfersItWasCalibratedOn) {
  // Pair: 20 us + bytes / 4 GB/s; host: 6 GB/s (1.5x a pair); memcpy 10 GB/s.
  const PairFit pair{
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

TEST(CalibratedCluster, FiguresNoClusterTakesAreNoiseNotBadInput) {
  // The tenth campaign's H7: noisy points fitted 2e-5 GB/s, which a cluster file refuses (NICs of
  // 0.001 GB/s and up). That refusal named "nics[0].gbps", a field of a file nobody wrote, as bad
  // input (exit 2); the same noise fitted a negative slope failed at runtime (exit 1). Both are a
  // runtime failure saying the measurements are noise.
  const PairFit pair{
      .latency = Seconds{20e-6}, .bandwidth = BytesPerSecond::from_gbps(2e-5), .worst_relative_residual = 0};
  const auto spec =
      calibrated_cluster(2, pair, BytesPerSecond::from_gbps(2e-5), BytesPerSecond::from_gbps(10));
  ASSERT_FALSE(spec);
  EXPECT_EQ(spec.error().code, ErrorCode::kRuntime) << spec.error().message;
  EXPECT_NE(spec.error().message.find("the measurements are noise"), std::string::npos)
      << spec.error().message;
}

TEST(CalibratedCluster, EachSenderPaysItsChunksOverhead) {
  // The pair above with c = 10 us per chunk. 8 MiB in 32 chunks of 256 KiB: 20 us + 32 x 10 us +
  // 8 MiB / 4 GB/s = 2437.152 us. Two pairs at once pay their overheads side by side, then share
  // the host's 6 GB/s: 20 + 320 us + 16 MiB / 6 GB/s = 3136.2 us. The file keeps the overhead.
  const PairFit pair{.latency = Seconds{20e-6},
                     .bandwidth = BytesPerSecond::from_gbps(4),
                     .chunk_overhead = Seconds{10e-6},
                     .worst_relative_residual = 0};
  const auto spec = calibrated_cluster(4, pair, BytesPerSecond::from_gbps(6), BytesPerSecond::from_gbps(10));
  ASSERT_TRUE(spec) << spec.error().message;
  const std::int64_t bytes = 8 << 20, chunk = 256 << 10;
  const double one = 20e-6 + 32 * 10e-6 + bytes / 4e9, two = 20e-6 + 32 * 10e-6 + 2.0 * bytes / 6e9;
  EXPECT_NEAR(predicted(*spec, 1, bytes, chunk).value, one, 1e-6 * one);
  EXPECT_NEAR(predicted(*spec, 2, bytes, chunk).value, two, 1e-6 * two);
  const auto read = cluster_from_json(cluster_to_json(Cluster::make(*spec).value()));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_DOUBLE_EQ(read->cluster.nics()[0].chunk_overhead.value, 10e-6);
}

TEST(CalibratedCluster, EachTransferPaysItsOverheadOnce) {
  // The pair above with t_o = 15 us per transfer and c = 10 us per chunk. One pair's 8 MiB as one
  // transfer in one chunk: 20 + 15 + 10 us + 8 MiB / 4 GB/s = 2142.152 us. As 8 tensors of 1 MiB,
  // a transfer each in one chunk each: 20 us + 8 x (15 + 10) us + 8 MiB / 4 GB/s = 2317.152 us:
  // the transfers follow each other on the pair, their overheads one after another. The file
  // keeps t_o, and so does the cache's.
  const PairFit pair{.latency = Seconds{20e-6},
                     .bandwidth = BytesPerSecond::from_gbps(4),
                     .chunk_overhead = Seconds{10e-6},
                     .transfer_overhead = Seconds{15e-6},
                     .worst_relative_residual = 0};
  const CacheCalibration cache{.one_pair = {},
                               .pair = {.latency = Seconds{10e-6},
                                        .bandwidth = BytesPerSecond::from_gbps(8),
                                        .transfer_overhead = Seconds{2e-6},
                                        .worst_relative_residual = 0},
                               .memcpy_bandwidth = BytesPerSecond::from_gbps(20),
                               .capacity = Bytes{1 << 20}};
  const auto spec =
      calibrated_cluster(4, pair, BytesPerSecond::from_gbps(6), BytesPerSecond::from_gbps(10), {}, cache);
  ASSERT_TRUE(spec) << spec.error().message;
  const std::int64_t bytes = 8 << 20;
  const double one = 20e-6 + 15e-6 + 10e-6 + bytes / 4e9, eight = 20e-6 + 8 * 25e-6 + bytes / 4e9;
  EXPECT_NEAR(predicted(*spec, 1, bytes).value, one, 1e-6 * one);
  EXPECT_NEAR(predicted(*spec, 1, bytes, 1 << 20, 8).value, eight, 1e-6 * eight);
  const auto read = cluster_from_json(cluster_to_json(Cluster::make(*spec).value()));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_DOUBLE_EQ(read->cluster.nics()[0].transfer_overhead.value, 15e-6);
  EXPECT_DOUBLE_EQ(read->cluster.spec().caches[0].transfer_overhead.value, 2e-6);
}

TEST(CalibratedCluster, NoPredictionBelowItsLowerBound) {
  // The host's one link (6 GB/s) serves every process, each process a domain whose uplink is 6 /
  // 1.5 = 4 GB/s. Two pairs of 8 MiB must leave the two source domains: through the link's 6 GB/s
  // (one link, counted once) and the two uplinks' 8 GB/s, so at least 16 MiB / 6 GB/s = 2796.2 us,
  // below the 2816.2 us predicted. (Dividing the link by the fabric's 1.5 as if it were one
  // domain's NICs gave 16 MiB / 4 GB/s = 4194.3 us, above the prediction.)
  const PairFit pair{
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

TEST(CalibratedCluster, EveryProcessQuantizesEachFormatAtItsMeasuredRateWhichItsFileKeeps) {
  // fp8-block128 at 1.25 GB/s, mxfp8 at 1.1: the file keeps both (an object of a rate per
  // format's name) and reads back the same.
  const PairFit pair{
      .latency = Seconds{20e-6}, .bandwidth = BytesPerSecond::from_gbps(4), .worst_relative_residual = 0};
  const auto spec = calibrated_cluster(4, pair, BytesPerSecond::from_gbps(6), BytesPerSecond::from_gbps(10),
                                       {BytesPerSecond::from_gbps(1.25), BytesPerSecond::from_gbps(1.1)});
  ASSERT_TRUE(spec) << spec.error().message;
  for (const auto& g : spec->gpus) {
    EXPECT_DOUBLE_EQ(of_scheme(g.quantize_bandwidth, QuantScheme::kFp8Block128).gbps(), 1.25);
    EXPECT_DOUBLE_EQ(of_scheme(g.quantize_bandwidth, QuantScheme::kMxfp8).gbps(), 1.1);
  }
  const auto json = cluster_to_json(Cluster::make(*spec).value());
  const auto& rates = json["gpus"][0]["quantize_gbps"];
  ASSERT_TRUE(rates.is_object()) << rates.dump();
  EXPECT_DOUBLE_EQ(rates["fp8-block128"].get<double>(), 1.25);
  EXPECT_DOUBLE_EQ(rates["mxfp8"].get<double>(), 1.1);
  const auto read = cluster_from_json(json);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->cluster.spec().gpus, spec->gpus);
}

TEST(CalibratedCluster, AHostNoFasterThanOnePairIsNotOversubscribed) {
  const PairFit pair{
      .latency = Seconds{1e-5}, .bandwidth = BytesPerSecond::from_gbps(4), .worst_relative_residual = 0};
  const auto spec = calibrated_cluster(2, pair, BytesPerSecond::from_gbps(3), BytesPerSecond::from_gbps(10));
  ASSERT_TRUE(spec) << spec.error().message;
  EXPECT_DOUBLE_EQ(spec->fabric.oversubscription, 1.0);
  EXPECT_DOUBLE_EQ(spec->nics[0].bandwidth.value, 4e9);
  EXPECT_FALSE(calibrated_cluster(0, pair, BytesPerSecond::from_gbps(3), BytesPerSecond::from_gbps(10)));
}

// The prediction of one pair moving `bytes` (8 MiB chunks, as planned by default) on `spec`.
Prediction predicted_through_the_facade(const ClusterSpec& spec, std::int64_t bytes) {
  const auto problem = pairs_problem(1, bytes);
  auto cluster = Cluster::make(spec).value();
  auto ranks = RankMap::place(cluster, job_of(problem)).value();
  const auto on = PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
  const ProblemSource none;
  auto rows = predict({.source = none, .problem = problem, .cluster = on}, {}).value().rows;
  EXPECT_EQ(rows.size(), 1u);
  return rows.front();
}

TEST(CalibratedCluster, ASmallRefitRunsAtTheInCacheFiguresALargeOneAtTheStreamingOnes) {
  // Streaming: 20 us + bytes / 4 GB/s. In cache, up to 16 MiB of shards on the host: 10 us +
  // bytes / 8 GB/s, memcpy 20 GB/s. The file keeps the cache.
  const PairFit streaming{
      .latency = Seconds{20e-6}, .bandwidth = BytesPerSecond::from_gbps(4), .worst_relative_residual = 0};
  const CacheCalibration cache{.one_pair = {},
                               .pair = {.latency = Seconds{10e-6},
                                        .bandwidth = BytesPerSecond::from_gbps(8),
                                        .worst_relative_residual = 0},
                               .memcpy_bandwidth = BytesPerSecond::from_gbps(20),
                               .capacity = Bytes{16 << 20}};
  const auto spec = calibrated_cluster(4, streaming, BytesPerSecond::from_gbps(4),
                                       BytesPerSecond::from_gbps(10), {}, cache);
  ASSERT_TRUE(spec) << spec.error().message;
  ASSERT_EQ(spec->caches.size(), 1u);
  EXPECT_DOUBLE_EQ(spec->caches[0].copy_bandwidth.gbps(), 20);
  const auto read = cluster_from_json(cluster_to_json(Cluster::make(*spec).value()));
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->cluster.spec().caches, spec->caches);
  // 4 MiB: 8 MiB of shards (source and destination) fit: 10 us + 4 MiB / 8 GB/s = 534.288 us.
  const auto small = predicted_through_the_facade(*spec, 4 << 20);
  EXPECT_NEAR(small.sim.predicted.value, 10e-6 + (4 << 20) / 8e9, 1e-9);
  EXPECT_NE(small.notes.back().find("within its cache (16.8 MB)"), std::string::npos) << small.notes.back();
  // 16 MiB: 32 MiB of shards overflow it: 20 us + 16 MiB / 4 GB/s = 4214.304 us.
  const auto large = predicted_through_the_facade(*spec, 16 << 20);
  EXPECT_NEAR(large.sim.predicted.value, 20e-6 + (16 << 20) / 4e9, 1e-9);
  EXPECT_NE(large.notes.back().find("more than its cache was calibrated with"), std::string::npos)
      << large.notes.back();
}

}  // namespace
}  // namespace refit
