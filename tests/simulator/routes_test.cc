// The flow model's resources of a cluster and the route of each kind of transfer over them
// (routes.h), on the test cluster: 2 nodes of 2 GPUs, one NIC per GPU, 50 GB/s NICs, 400 GB/s
// NVLink, 1500 GB/s copy engines.
#include "routes.h"

#include <gtest/gtest.h>

#include "test_cluster.h"

namespace refit::sim {
namespace {

Transfer between(std::int32_t from, std::int32_t to, LinkKind link) {
  return Transfer{.id = 0,
                  .sender = Rank{from},
                  .receiver = Rank{to},
                  .link = link,
                  .segments = {},
                  .bytes = {},
                  .chunk = {}};
}

std::vector<std::string> names(const Model& m, const std::vector<ResourceId>& ids) {
  std::vector<std::string> out;
  for (const auto id : ids) out.push_back(m.resource_name(id));
  return out;
}

TEST(Routes, EachLinkKindCrossesItsResources) {
  // Ranks 0, 1 on node 0 (GPUs 0, 1), ranks 2, 3 on node 1 (GPUs 2, 3). Per GPU: NVLink out,
  // in, copy (12); per NIC: tx, rx (8); no uplinks on a non-blocking fabric.
  const auto c = refit::testing::make_test_cluster(2, 2, 2, 2);
  Model m;
  const Routes routes(c, m);
  EXPECT_EQ(m.resource_count(), 4 * 3 + 4 * 2);
  std::vector<ResourceId> r;
  routes.crossed(between(0, 2, LinkKind::kNetwork), false, false, r);
  EXPECT_EQ(names(m, r), (std::vector<std::string>{"nic 0 tx", "nic 2 rx"}));
  routes.crossed(between(0, 1, LinkKind::kNvlink), false, false, r);
  EXPECT_EQ(names(m, r), (std::vector<std::string>{"gpu 0 nvlink out", "gpu 1 nvlink in"}));
  routes.crossed(between(3, 3, LinkKind::kLocal), false, false, r);
  EXPECT_EQ(names(m, r), (std::vector<std::string>{"gpu 3 copy"}));
  // Network latency is the sender NIC's (15 us), NVLink's otherwise (5 us).
  EXPECT_DOUBLE_EQ(routes.latency(between(0, 2, LinkKind::kNetwork)).value, 15e-6);
  EXPECT_DOUBLE_EQ(routes.latency(between(0, 1, LinkKind::kNvlink)).value, 5e-6);
  EXPECT_EQ(Routes::kind(LinkKind::kNetwork), TaskKind::kNetwork);
  EXPECT_EQ(Routes::kind(LinkKind::kNvlink), TaskKind::kNvlink);
  EXPECT_EQ(Routes::kind(LinkKind::kLocal), TaskKind::kCopy);
  EXPECT_EQ(m.track_name(routes.track(between(1, 2, LinkKind::kNetwork))), "nic 1");
  EXPECT_EQ(m.track_name(routes.track(between(1, 0, LinkKind::kNvlink))), "gpu 1");
}

TEST(Routes, APackCrossesTheCopyEngineOnlyWhereItCanBind) {
  // 1500 GB/s of copy against 2 x 400 (NVLink) + 2 x 50 (NIC) = 900 GB/s of links: the copy
  // engine is never the bottleneck, so packing and unpacking add no resource. With 800 GB/s
  // NVLink the links reach 2 x 800 + 2 x 50 = 1700 GB/s > 1500: the sender's and the receiver's
  // copy engines join the flow.
  std::vector<ResourceId> r;
  const auto fast_copy = refit::testing::make_test_cluster(2, 2, 2, 2);
  Model m;
  const Routes routes(fast_copy, m);
  routes.crossed(between(0, 2, LinkKind::kNetwork), true, true, r);
  EXPECT_EQ(names(m, r), (std::vector<std::string>{"nic 0 tx", "nic 2 rx"}));
  const auto slow_copy = refit::testing::make_test_cluster(2, 2, 2, 2, 50, 800);
  Model m2;
  const Routes binding(slow_copy, m2);
  binding.crossed(between(0, 2, LinkKind::kNetwork), true, false, r);
  EXPECT_EQ(names(m2, r), (std::vector<std::string>{"nic 0 tx", "nic 2 rx", "gpu 0 copy"}));
  binding.crossed(between(0, 2, LinkKind::kNetwork), true, true, r);
  EXPECT_EQ(names(m2, r), (std::vector<std::string>{"nic 0 tx", "nic 2 rx", "gpu 0 copy", "gpu 2 copy"}));
  // 1 MB at 1500 GB/s.
  EXPECT_NEAR(binding.copy_time(Bytes{1'000'000}, Rank{0}).value, 1e6 / 1500e9, 1e-18);
}

}  // namespace
}  // namespace refit::sim
