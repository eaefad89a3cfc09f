#include <gtest/gtest.h>

#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"
#include "test_problems.h"

namespace refit {
namespace {

using testing::make_layout;
using testing::rank_range;

TEST(LowerBound, DestinationDomainReceiveBound) {
  // 8 MiB replicated on all 4 GPUs of domain 1, held on domain 0: domain 1 must receive 8 MiB
  // through 4 NICs of 50 GB/s: 8 MiB / 200 GB/s. The source side injects the same 8 MiB through
  // 4 NICs, so the two bounds are equal; each GPU needs 8 MiB over 450 GB/s (NVLink + NIC).
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {4}, rank_range(0, 4), "S0"),
                                 make_layout({4096, 1024}, {4}, rank_range(4, 4), "R"))},
          4, 4)
          .value();
  const auto c = testing::make_test_cluster(2, 4, 4, 4);
  const auto lb = lower_bound(p, c);
  const double bytes = 4096.0 * 1024 * 2;
  EXPECT_NEAR(lb.destination_domain.value, bytes / 200e9, 1e-12);
  EXPECT_NEAR(lb.source_side.value, bytes / 200e9, 1e-12);
  EXPECT_NEAR(lb.gpu_ingress.value, bytes / 450e9, 1e-12);
  EXPECT_EQ(lb.domain_need[1].value, static_cast<std::int64_t>(bytes));
  EXPECT_NEAR(lb.time.value, bytes / 200e9, 1e-12);

  // refit reaches it: every byte enters domain 1 once, spread evenly over its 4 NICs.
  const auto s = compute_stats(make_plan("refit", p, c).value(), c);
  EXPECT_EQ(s.domain_ingress[1], lb.domain_need[1]);
  EXPECT_EQ(s.max_nic_rx.value, static_cast<std::int64_t>(bytes / 4));
}

TEST(LowerBound, SingleHolderNicBound) {
  // The whole 8 MiB sits on rank 0 alone: it must leave through NIC 0 at least once.
  const auto p =
      ReshardProblem::make(
          {testing::make_reshard("w", {4096, 1024}, make_layout({4096, 1024}, {1}, rank_range(0, 1), "R"),
                                 make_layout({4096, 1024}, {4}, rank_range(4, 4), "S0"))},
          4, 4)
          .value();
  const auto lb = lower_bound(p, testing::make_test_cluster(2, 4, 4, 4));
  EXPECT_NEAR(lb.source_nic.value, 4096.0 * 1024 * 2 / 50e9, 1e-12);
  EXPECT_EQ(lb.binding, "single source NIC");
}

}  // namespace
}  // namespace refit
