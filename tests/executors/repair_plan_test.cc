// Elastic refit's repair step (repair_plan.h), without a transport.
//
// Expected maths: with only inference ranks gone (every training rank holds its data), every
// inference rank not left out that a dropped transfer was to feed is re-fed (a training rank only
// relays); then each element of its destination box is written by a transfer of the full plan
// that was not dropped or by the repair (brute force, element by element), and only the gone
// rank's engine misses the step. Every repair segment comes straight from a training rank that is
// not left out and whose source box holds it.
#include <gtest/gtest.h>

#include "box_elements.h"
#include "one_rank_gone.h"
#include "random_problems.h"
#include "refit/executors/membership.h"
#include "refit/executors/repair_plan.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"

namespace refit {
namespace {

// Whether every element of `receiver`'s destination box of each tensor is written by `transfers`.
bool covered(const ReshardProblem& problem, const std::vector<const Transfer*>& transfers, Rank receiver) {
  for (std::size_t i = 0; i < problem.tensors().size(); ++i) {
    const auto& t = problem.tensors()[i];
    const auto mine = t.destination.local_box(receiver);
    if (!mine) continue;  // not a destination of this tensor
    std::vector<int> written(static_cast<std::size_t>(element_count(t.tensor.shape)), 0);
    for (const Transfer* x : transfers)
      for (const Segment& s : x->segments)
        if (s.tensor == i && x->receiver == receiver) testing::count_elements(t.tensor.shape, s.box, written);
    std::vector<int> wanted(written.size(), 0);
    testing::count_elements(t.tensor.shape, *mine, wanted);
    for (std::size_t e = 0; e < wanted.size(); ++e)
      if (wanted[e] > 0 && written[e] == 0) return false;
  }
  return true;
}

TEST(RepairPlan, ReFeedsEverySurvivorADroppedTransferWasToFeed) {
  int refed_cases = 0;
  testing::for_each_one_rank_gone(
      34, 20, 2, [&](const ReshardProblem& problem, const Plan& plan, const std::vector<bool>& gone) {
        const auto excluded = excluded_ranks(consecutive_engines(2, 6, 2).value(), gone);
        const auto dropped = dropped_transfers(plan, excluded);
        const auto repair = repair_plan(plan, excluded, dropped);
        ASSERT_TRUE(validate_structure(repair)) << validate_structure(repair).error().message;
        std::vector<const Transfer*> delivered;
        for (const Transfer& t : plan.transfers)
          if (!dropped[static_cast<std::size_t>(t.id)]) delivered.push_back(&t);
        for (const Transfer& t : repair.transfers) {
          delivered.push_back(&t);
          ASSERT_LT(t.sender.value, 2);
          for (const Segment& s : t.segments) {
            EXPECT_EQ(s.via, kFromSourceShard);
            const auto held = problem.tensors()[s.tensor].source.local_box(t.sender);
            ASSERT_TRUE(held);
            EXPECT_TRUE(held->contains(s.box)) << "transfer " << t.id << " sends " << s.box.to_string();
          }
        }
        for (const Transfer& t : plan.transfers) {
          if (!dropped[static_cast<std::size_t>(t.id)] || t.receiver.value < 2 ||
              excluded[static_cast<std::size_t>(t.receiver.value)])
            continue;
          ++refed_cases;
          EXPECT_TRUE(covered(problem, delivered, t.receiver)) << "rank " << t.receiver.value;
        }
        // With the repair complete, only the gone rank's engine misses the step.
        const auto outcomes =
            repaired_outcomes(plan, dropped, repair, std::vector<bool>(repair.transfers.size()),
                              consecutive_engines(2, 6, 2).value(), gone);
        const auto lost = static_cast<std::int32_t>(std::ranges::find(gone, true) - gone.begin() - 2) / 2;
        EXPECT_EQ(outcomes.missed, std::vector<std::int32_t>{lost});
        EXPECT_EQ(outcomes.completed.size(), std::size_t{2});
      });
  EXPECT_GT(refed_cases, 0);  // some plans relayed through the rank that went
}

// A piece that started at a gone training rank cannot be re-sent: a receiver that rank 0 fed
// directly is not re-fed at all, and nothing is re-sent from rank 0.
TEST(RepairPlan, LeavesOutAReceiverWhoseDataStartedAtAGoneRank) {
  testing::RandomProblems gen(35);
  const auto problem = gen.problem(2, 6, 3, 40);
  const auto plan =
      make_plan("refit", problem, testing::make_test_cluster(2, 6, 2, 6), PlanOptions{.chunk = Bytes{64}})
          .value();
  std::vector<bool> gone(8, false);
  gone[0] = true;
  const auto excluded = excluded_ranks(consecutive_engines(2, 6, 2).value(), gone);
  const auto repair = repair_plan(plan, excluded, dropped_transfers(plan, excluded));
  std::vector<bool> refed(8, false);
  for (const Transfer& t : repair.transfers) {
    EXPECT_NE(t.sender.value, 0);
    refed[static_cast<std::size_t>(t.receiver.value)] = true;
  }
  int fed_by_rank_0 = 0;
  for (const Transfer& t : plan.transfers)
    if (t.sender.value == 0 && t.receiver.value >= 2) {
      ++fed_by_rank_0;
      EXPECT_FALSE(refed[static_cast<std::size_t>(t.receiver.value)]) << "rank " << t.receiver.value;
    }
  EXPECT_GT(fed_by_rank_0, 0);
}

}  // namespace
}  // namespace refit
