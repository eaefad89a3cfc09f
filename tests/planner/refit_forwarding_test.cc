// Forwarding between destination domains (refit_forwarding.h) on hand-built assignments: who
// sends each box to each domain, and how deep the trees of domains passing it on grow.
#include <algorithm>
#include <deque>
#include <vector>

#include <gtest/gtest.h>

#include "refit_forwarding.h"
#include "refit_pieces.h"
#include "test_cluster.h"

namespace refit::planner_detail {
namespace {

// Network hops between a source and assignment i: 1 straight from a source, 1 + its feeder's.
int hops(const std::vector<Assignment>& a, std::size_t i) {
  int n = 1;
  for (auto j = a[i].relay_from; j >= 0; j = a[static_cast<std::size_t>(j)].relay_from) ++n;
  return n;
}

TEST(RefitForwarding, PiecesThatEveryDomainTakesFromFewReplicasSpreadInTreesAsShallowAsTheirRoomAllows) {
  // 4 source replicas (ranks 0..3, a NIC each) each hold all 16 pieces of 1 MiB; 8 destination
  // domains of 4 GPUs each take every piece, domains 2h and 2h+1 from replica h (holder_share),
  // landing on GPU p mod 4 of the domain. Each replica's NIC would send 2 x 16 = 32 MiB while each
  // receiving NIC takes 4 pieces, 4 MiB: the 4 source NICs can send the 16 pieces once in that
  // time, so each piece leaves the sources once and 7 domains take it from domains that have it,
  // 7 x 16 = 112 MiB over the 32 destination NICs' 128 MiB of room. A chain of domains would
  // make the last wait on all the hops before it (the trees went 8 hops deep). The NIC a piece
  // first lands on can pass it to 4 domains at most (4 MiB of room), and those to the other 3:
  // every domain has each piece within 3 network hops of a source, the fewest that room allows,
  // and no NIC sends for longer than the busiest receiver takes in.
  constexpr std::int32_t kDomains = 8, kGpus = 4, kPieces = 16;
  constexpr std::int64_t kPiece = 1 << 20;
  const auto cluster = testing::make_test_cluster(1 + kDomains, kGpus, kGpus, kDomains * kGpus);
  std::deque<Box> boxes;
  std::vector<Assignment> a;
  for (std::uint32_t p = 0; p < kPieces; ++p) {
    const Box& box = boxes.emplace_back(Box{{static_cast<std::int64_t>(p) * 512, 0}, {512, 1024}});
    for (std::int32_t d = 0; d < kDomains; ++d)
      a.push_back(
          Assignment{.item = {.tensor = 0, .dest = 0, .group = static_cast<std::uint32_t>(d), .piece = p},
                     .sender = Rank{d / 2},
                     .landing = Rank{kGpus * (1 + d) + static_cast<std::int32_t>(p) % kGpus},
                     .box = &box});
  }
  const std::vector<std::int64_t> bytes(a.size(), kPiece);
  EXPECT_TRUE(forward_between_domains(a, cluster, bytes));
  std::vector<int> from_sources(kPieces, 0);
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(hops(a, i), 3) << "assignment " << i;
    if (a[i].relay_from < 0) ++from_sources[a[i].item.piece];
  }
  for (std::uint32_t p = 0; p < kPieces; ++p) EXPECT_EQ(from_sources[p], 1) << "piece " << p;
  const auto loads = nic_loads(a, bytes, cluster);
  const double most = *std::ranges::max_element(loads.tx);
  EXPECT_LE(most / cluster.cluster().nics()[0].bandwidth.value, loads.receiving_s);
}

TEST(RefitForwarding, ABoxEveryNicCanPassOnOnceGoesInATreeNoDeeperThanABinaryOne) {
  // Ranks 0 and 1 (a NIC each) hold one 8 MiB box that 16 single-GPU domains take, domains 0..7
  // from rank 0 and 8..15 from rank 1. Each receiving NIC takes in 8 MiB, so each landing NIC has
  // room to pass the box on once: room alone grows chains, 8 domains one behind the other for
  // each rank (8 network hops; a 1 GB embedding to 256 DGX domains went down 249). No domain is
  // more than bit_width(16) = 5 hops of forwarding below a source, 6 network hops, at the cost of
  // some landing NICs passing it on twice; each rank still sends it once.
  constexpr std::int32_t kDomains = 16, kGpus = 2;
  const auto cluster = testing::make_test_cluster(1 + kDomains, kGpus, kGpus, kDomains * kGpus);
  const Box box{{0, 0}, {4096, 1024}};
  std::vector<Assignment> a;
  for (std::int32_t d = 0; d < kDomains; ++d)
    a.push_back(
        Assignment{.item = {.tensor = 0, .dest = 0, .group = static_cast<std::uint32_t>(d), .piece = 0},
                   .sender = Rank{d / 8},
                   .landing = Rank{kGpus * (1 + d)},
                   .box = &box});
  const std::vector<std::int64_t> bytes(a.size(), 8 << 20);
  forward_between_domains(a, cluster, bytes);
  int from_sources = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    EXPECT_LE(hops(a, i), 6) << "assignment " << i;
    from_sources += a[i].relay_from < 0;
  }
  EXPECT_EQ(from_sources, 2);
}

}  // namespace
}  // namespace refit::planner_detail
