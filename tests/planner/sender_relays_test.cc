// Sending through a neighbour's NIC (sender_relays.h) on hand-built assignments.
#include <deque>
#include <vector>

#include <gtest/gtest.h>

#include "refit_pieces.h"
#include "sender_relays.h"
#include "test_cluster.h"

namespace refit::planner_detail {
namespace {

TEST(SenderRelays, ABoxSentToTwoDomainsHopsToItsRelayOnce) {
  // Rank 0 sends box b (1 MiB) and box c (2 MiB) to ranks 2 and 4 (nodes 1 and 2); rank 1 beside
  // it sends nothing. NIC 0 sends 6 MiB and each receiving NIC takes in 3: the level is 3 MiB
  // (the mean of node 0's NICs, and the busiest receiver's), so 3 MiB should move to rank 1's NIC:
  // b to rank 2 and b to rank 4, whole, and c not at all (what is left, 1 MiB, is less than the
  // 4 MiB these cuts allow). Both copies of b cross from rank 1 after one NVLink hop that brings b
  // there once (two hops would land it twice in the relay's scratch): NIC 0 sends c twice, 4 MiB,
  // and NIC 1 b twice, 2 MiB.
  const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
  const Box b{{0, 0}, {512, 1024}}, c{{512, 0}, {1024, 1024}};
  auto assignment = [](std::uint32_t piece, std::int32_t landing, const Box& box) {
    return Assignment{.item = {.tensor = 0, .dest = 0, .group = 0, .piece = piece},
                      .sender = Rank{0},
                      .landing = Rank{landing},
                      .box = &box};
  };
  std::vector<Assignment> a{assignment(0, 2, b), assignment(0, 4, b), assignment(1, 2, c),
                            assignment(1, 4, c)};
  std::vector<std::int64_t> bytes{1 << 20, 1 << 20, 2 << 20, 2 << 20};
  std::deque<Box> boxes;
  const RelayCuts cuts{.element_size = {2}, .min_split = 4 << 20, .touches = [](auto...) { return false; }};
  relay_at_senders(
      a, bytes, boxes, [] { return std::vector<std::int32_t>(6, 0); }, cluster, cuts);
  ASSERT_EQ(a.size(), 5u);  // one hop added
  const auto& hop = a[4];
  EXPECT_TRUE(hop.hop);
  EXPECT_EQ(hop.sender, Rank{0});
  EXPECT_EQ(hop.landing, Rank{1});
  EXPECT_EQ(*hop.box, b);
  EXPECT_EQ(a[0].relay_from, 4);
  EXPECT_EQ(a[1].relay_from, 4);
  EXPECT_EQ(a[2].relay_from, -1);
  EXPECT_EQ(a[3].relay_from, -1);
}

}  // namespace
}  // namespace refit::planner_detail
