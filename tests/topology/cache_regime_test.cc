// A node's cache (CacheSpec): the cluster as a refit runs on it, the node's in-cache figures where
// the shards its ranks hold fit in the cache, the streaming ones where they overflow it; and the
// cluster refuses a cache it could not have.
#include "refit/topology/cache_regime.h"

#include <gtest/gtest.h>

#include "test_cluster.h"

namespace refit {
namespace {

// Two nodes of two GPUs (50 GB/s NICs, 15 us, copies at 1500 GB/s); node 0 has a cache of 1 MiB
// in which its NICs run at 80 GB/s with 5 us, 1 us per chunk and 3 us per transfer, and its
// copies at 2000 GB/s.
ClusterSpec two_nodes_one_cached() {
  auto spec = testing::make_test_cluster(2, 2, 2, 2).cluster().spec();
  spec.caches.push_back({.node = 0,
                         .capacity = Bytes{1 << 20},
                         .nic_bandwidth = BytesPerSecond::from_gbps(80),
                         .nic_latency = Seconds{5e-6},
                         .chunk_overhead = Seconds{1e-6},
                         .transfer_overhead = Seconds{3e-6},
                         .copy_bandwidth = BytesPerSecond::from_gbps(2000)});
  return spec;
}

TEST(CacheRegime, ANodeWhoseShardsFitRunsAtItsInCacheFiguresTheOthersAsBefore) {
  const auto spec = two_nodes_one_cached();
  // Exactly the capacity still fits: node 0's NICs (GPUs 0 and 1) and copies take the cache's
  // figures; node 1, without a cache, keeps its own.
  const auto fitted = in_cache_regime(spec, {{0, Bytes{1 << 20}}, {1, Bytes{1 << 30}}});
  for (const auto& nic : fitted.nics) {
    const bool cached = nic.node == 0;
    EXPECT_DOUBLE_EQ(nic.bandwidth.gbps(), cached ? 80 : 50) << nic.id;
    EXPECT_DOUBLE_EQ(nic.latency.value, cached ? 5e-6 : 15e-6) << nic.id;
    EXPECT_DOUBLE_EQ(nic.chunk_overhead.value, cached ? 1e-6 : 0) << nic.id;
    EXPECT_DOUBLE_EQ(nic.transfer_overhead.value, cached ? 3e-6 : 0) << nic.id;
  }
  for (const auto& gpu : fitted.gpus)
    EXPECT_DOUBLE_EQ(gpu.copy_bandwidth.gbps(), gpu.node == 0 ? 2000 : 1500);
  // One byte more overflows it: the streaming figures, the spec unchanged.
  EXPECT_EQ(in_cache_regime(spec, {{0, Bytes{(1 << 20) + 1}}}), spec);
}

// A tensor of 4 x 8 bf16 (64 bytes) from ranks 0 and 1 (node 0), each holding half (32 bytes),
// to ranks 2 and 3 (node 1), each holding all of it.
ReshardProblem halves_to_copies() {
  const Shape shape{4, 8};
  auto spec = make_tensor_spec("w", shape, DType::kBF16).value();
  auto from = Layout::make(shape, Mesh::make({2}, {Rank{0}, Rank{1}}).value(), {Placement::shard(0)}).value();
  auto to =
      Layout::make(shape, Mesh::make({2}, {Rank{2}, Rank{3}}).value(), {Placement::replicate()}).value();
  return ReshardProblem::make({{spec, from, to}}, 2, 2).value();
}

TEST(CacheRegime, ANodesShardsAreWhatItsRanksHoldOnBothSides) {
  const auto placed = testing::make_test_cluster(2, 2, 2, 2);
  // Node 0: 2 x 32 bytes of source; node 1: 2 x 64 bytes of destination.
  const auto held = shard_bytes_by_node(halves_to_copies(), placed);
  EXPECT_EQ(held, (std::map<std::int32_t, Bytes>{{0, Bytes{64}}, {1, Bytes{128}}}));
}

TEST(CacheRegime, APlacedClusterSaysWhichRegimeEachCachedNodeRunsIn) {
  const auto placed = testing::place_test_ranks(two_nodes_one_cached(), 2, 2);
  const auto regime = cache_regime(halves_to_copies(), placed);
  ASSERT_TRUE(regime) << regime.error().message;
  ASSERT_TRUE(regime->has_value());
  EXPECT_DOUBLE_EQ((*regime)->cluster.cluster().nics()[0].bandwidth.gbps(), 80);
  ASSERT_EQ((*regime)->notes.size(), 1u);  // node 0 only: node 1 has no cache
  EXPECT_NE((*regime)->notes[0].find("node 0: its ranks hold 0.0 MB of shards, within its cache (1.0 MB)"),
            std::string::npos)
      << (*regime)->notes[0];
  // Without a cache there is nothing to say, and nothing is copied.
  const auto plain = cache_regime(halves_to_copies(), testing::make_test_cluster(2, 2, 2, 2));
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->has_value());
}

TEST(CacheRegime, AClusterRefusesACacheItCouldNotHaveNamingIt) {
  const auto refused = [](auto change) {
    auto spec = two_nodes_one_cached();
    change(spec.caches);
    const auto made = Cluster::make(spec);
    return made ? std::string("accepted") : made.error().message;
  };
  EXPECT_EQ(refused([](auto& c) { c[0].node = 2; }), "caches[0].node: no GPU is on node 2");
  EXPECT_EQ(refused([](auto& c) { c.push_back(c[0]); }), "caches[1].node: node 0 already has a cache");
  EXPECT_EQ(refused([](auto& c) { c[0].capacity = Bytes{0}; }),
            "caches[0].capacity_bytes is 0, must be >= 1");
  EXPECT_NE(
      refused([](auto& c) { c[0].nic_bandwidth = BytesPerSecond{0}; }).find("caches[0].nic_gbps is 0 GB/s"),
      std::string::npos);
  EXPECT_NE(
      refused([](auto& c) { c[0].nic_latency = Seconds{2}; }).find("caches[0].latency_us is 2000000 us"),
      std::string::npos);
  EXPECT_NE(refused([](auto& c) { c[0].copy_bandwidth = BytesPerSecond{1e20}; }).find("caches[0].copy_gbps"),
            std::string::npos);
}

}  // namespace
}  // namespace refit
