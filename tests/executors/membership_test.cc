// Elastic refit's bookkeeping (membership.h), without a transport: which ranks an execution
// leaves out, which transfers it drops, which engines complete.
//
// Expected maths: a transfer is dropped iff its sender or receiver is left out, or some transfer
// it forwards data of (Transfer::upstream, transitively) is; the reference below follows the
// dependencies recursively from each transfer, where the code makes one pass in plan order. An
// engine misses the step iff a rank of it is gone or a dropped transfer lands in it.
#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "one_rank_gone.h"
#include "refit/executors/membership.h"

namespace refit {
namespace {

bool reference_dropped(const Plan& plan, const std::vector<bool>& excluded, std::int32_t t) {
  const Transfer& x = plan.transfers[static_cast<std::size_t>(t)];
  if (excluded[static_cast<std::size_t>(x.sender.value)] ||
      excluded[static_cast<std::size_t>(x.receiver.value)])
    return true;
  for (const auto u : x.upstream())
    if (reference_dropped(plan, excluded, u)) return true;
  return false;
}

TEST(EngineMembership, ConsecutiveEnginesFollowTheDestinationRanks) {
  // 2 training ranks, 6 inference ranks in engines of 2: ranks 2,3 -> 0; 4,5 -> 1; 6,7 -> 2.
  const auto m = consecutive_engines(2, 6, 2, 7).value();
  EXPECT_EQ(m.epoch, 7U);
  EXPECT_EQ(m.engine_of, (std::vector<std::int32_t>{kNoEngine, kNoEngine, 0, 0, 1, 1, 2, 2}));
  EXPECT_EQ(m.members, (std::vector<bool>{true, true, true}));
  EXPECT_TRUE(check_engine_membership(m, 8));
}

TEST(EngineMembership, RefusesWhatDoesNotFitNamingIt) {
  const auto odd = consecutive_engines(2, 5, 2);
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("5 destination ranks"), std::string::npos) << odd.error().message;
  auto m = consecutive_engines(1, 2, 1).value();
  EXPECT_NE(check_engine_membership(m, 4).error().message.find("plan has 4 ranks"), std::string::npos);
  m.engine_of[2] = 5;
  EXPECT_NE(check_engine_membership(m, 3).error().message.find("rank 2 in engine 5"), std::string::npos);
  m.engine_of[2] = 0;  // engine 1 is left without a rank
  EXPECT_NE(check_engine_membership(m, 3).error().message.find("engine 1 has no rank"), std::string::npos);
}

// What set_membership takes: the checks above, and an epoch above 0.
TEST(EngineMembership, SetMembershipRefusesEpochZeroAndAnotherWorld) {
  auto m = consecutive_engines(2, 6, 2, 3).value();
  EXPECT_TRUE(check_set_membership(m, 8));
  EXPECT_NE(
      check_set_membership(m, 9).error().message.find("membership: the membership names the engines of 8"),
      std::string::npos);
  m.epoch = 0;
  const auto zero = check_set_membership(m, 8);
  ASSERT_FALSE(zero);
  EXPECT_EQ(zero.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(zero.error().message.find("epoch 0"), std::string::npos) << zero.error().message;
}

TEST(EngineMembership, AGoneRankTakesItsWholeEngineOutButAGoneTrainingRankAlone) {
  auto m = consecutive_engines(2, 6, 2).value();
  m.members[2] = false;
  std::vector<bool> gone(8, false);
  gone[1] = gone[4] = true;
  // Training rank 1 alone; engine 1 (ranks 4, 5) for rank 4; engine 2 (6, 7) is no member.
  EXPECT_EQ(excluded_ranks(m, gone), (std::vector<bool>{false, true, false, false, true, true, true, true}));
}

TEST(EngineMembership, DroppedTransfersMatchTheRecursiveReference) {
  testing::for_each_one_rank_gone(
      33, 20, 0, [](const ReshardProblem&, const Plan& plan, const std::vector<bool>& gone) {
        const auto m = consecutive_engines(2, 6, 2).value();
        const auto excluded = excluded_ranks(m, gone);
        const auto dropped = dropped_transfers(plan, excluded);
        for (const Transfer& t : plan.transfers)
          EXPECT_EQ(dropped[static_cast<std::size_t>(t.id)], reference_dropped(plan, excluded, t.id)) << t.id;
        // Engines: missed iff gone or landed in by a dropped transfer; the two lists cover all.
        const auto outcomes = engine_outcomes(plan, m, gone, dropped);
        std::vector<bool> missed(3, false);
        for (std::size_t r = 2; r < 8; ++r) missed[(r - 2) / 2] = missed[(r - 2) / 2] || gone[r];
        for (const Transfer& t : plan.transfers)
          if (dropped[static_cast<std::size_t>(t.id)] && t.receiver.value >= 2)
            missed[static_cast<std::size_t>((t.receiver.value - 2) / 2)] = true;
        std::vector<std::int32_t> want_completed;
        std::vector<std::int32_t> want_missed;
        for (std::int32_t e = 0; e < 3; ++e)
          (missed[static_cast<std::size_t>(e)] ? want_missed : want_completed).push_back(e);
        EXPECT_EQ(outcomes.completed, want_completed);
        EXPECT_EQ(outcomes.missed, want_missed);
      });
}

TEST(EngineMembership, NonMemberEnginesAreInNeitherList) {
  const auto problem = testing::RandomProblems(5).problem(2, 6, 2, 20);
  const auto plan = make_plan("direct", problem, testing::make_test_cluster(2, 6, 2, 6), {}).value();
  auto m = consecutive_engines(2, 6, 2).value();
  m.members[1] = false;
  const std::vector<bool> gone(8, false);
  const auto outcomes = engine_outcomes(plan, m, gone, dropped_transfers(plan, excluded_ranks(m, gone)));
  // Direct plans have no relays: engines 0 and 2 lose nothing to engine 1's absence.
  EXPECT_EQ(outcomes.completed, (std::vector<std::int32_t>{0, 2}));
  EXPECT_TRUE(outcomes.missed.empty());
}

}  // namespace
}  // namespace refit
