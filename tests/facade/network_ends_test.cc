// A GPU without a NIC cannot take part in the network: a plan that would send or receive there is
// refused, naming the rank and the GPU, rather than planned over no link (the baselines' transfers
// once crossed no resource in the simulator and took no time, or failed naming a simulator task).
#include <gtest/gtest.h>

#include "refit/planner/links.h"
#include "refit/planner/strategy.h"
#include "refit/refit.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

// 8 MiB split over ranks 0-1 on node 0, needed whole by ranks 2-3 on node 1, whose GPU 3 has no
// NIC (the last NIC of the test cluster removed).
struct NoNicOnGpu3 {
  ReshardProblem problem =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {2}, rank_range(0, 2), "S0"),
                                 make_layout({4096, 1024}, {2}, rank_range(2, 2), "R"))},
          2, 2)
          .value();
  PlacedCluster cluster = [] {
    auto spec = testing::make_test_cluster(2, 2, 2, 2).cluster().spec();
    spec.nics.pop_back();
    return testing::place_test_ranks(std::move(spec), 2, 2);
  }();
};

TEST(NetworkEnds, APlanThatSendsToAGpuWithoutANicIsRefusedNamingIt) {
  // Each strategy's plan lands its network bytes behind NICs (refit on GPU 2, completing GPU 3 over
  // NVLink; m2n-ring through its domain leader) or is refused, not as an internal error: the
  // cluster is input. direct sends to every replica, rank 3 among them.
  const NoNicOnGpu3 c;
  for (const auto& s : strategies()) {
    const auto made = plan(c.problem, c.cluster, s.name);
    if (made) {
      EXPECT_TRUE(check_network_ends(*made, c.cluster)) << s.name;
      EXPECT_NE(s.id, StrategyId::kDirect);
      continue;
    }
    EXPECT_EQ(made.error().code, ErrorCode::kMismatch) << s.name << ": " << made.error().message;
    EXPECT_NE(made.error().message.find("but rank 3's GPU 3 has no NIC on this cluster"), std::string::npos)
        << s.name << ": " << made.error().message;
  }
}

TEST(NetworkEnds, APlanFileIsCheckedAgainstTheClustersNics) {
  // A plan made where GPU 3 has a NIC, read against the cluster where it has none.
  const NoNicOnGpu3 c;
  const auto with_nic = testing::make_test_cluster(2, 2, 2, 2);
  const auto made = plan(c.problem, with_nic, "direct").value();
  const auto checked = check_links(made, c.cluster);
  ASSERT_FALSE(checked);
  EXPECT_EQ(checked.error().code, ErrorCode::kMismatch);
  EXPECT_NE(checked.error().message.find("crosses the network, but rank 3's GPU 3 has no NIC"),
            std::string::npos)
      << checked.error().message;
}

}  // namespace
}  // namespace refit
