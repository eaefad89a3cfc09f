// Elastic refit with the membership known before the step (member_step.h), without a transport.
//
// Expected maths: the step's plan moves no byte to or from a rank of a non-member engine; every
// element of every member's destination box is written exactly once (counted element by element
// over the segments each member receives, cut to its box: the brute-force reference), since the
// full plan wrote it once and either that transfer is kept or it was dropped and is re-fed whole;
// a kept transfer is the full plan's, renumbered; a re-fed one comes from a training rank whose
// source box holds each segment. With every training rank present every member completes, and
// the planner's validate accepts the plan against the problem cut to the members.
#include <gtest/gtest.h>

#include <random>

#include "box_elements.h"
#include "engine_problems.h"
#include "one_rank_gone.h"
#include "refit/executors/member_step.h"
#include "refit/planner/membership.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"

namespace refit {
namespace {

// The first element of `receiver`'s destination boxes not written exactly once, as a message;
// empty when each is.
std::string written_once(const ReshardProblem& problem, const Plan& plan, Rank receiver) {
  for (std::size_t i = 0; i < problem.tensors().size(); ++i) {
    const auto& t = problem.tensors()[i];
    const auto mine = t.destination.local_box(receiver);
    if (!mine || mine->empty()) continue;
    std::vector<int> writes(static_cast<std::size_t>(element_count(t.tensor.shape)), 0);
    for (const Transfer& x : plan.transfers)
      for (const Segment& s : x.segments)
        if (x.receiver == receiver && s.tensor == i)
          if (const auto part = intersect(s.box, *mine))
            testing::count_elements(t.tensor.shape, *part, writes);
    std::vector<int> wanted(writes.size(), 0);
    testing::count_elements(t.tensor.shape, *mine, wanted);
    for (std::size_t e = 0; e < writes.size(); ++e)
      if (wanted[e] == 1 && writes[e] != 1)
        return "rank " + std::to_string(receiver.value) + ", tensor " + std::to_string(i) + ", element " +
               std::to_string(e) + " written " + std::to_string(writes[e]) + " times";
  }
  return {};
}

std::vector<bool> none_gone(const Plan& plan) {
  return std::vector<bool>(static_cast<std::size_t>(plan.world_size()), false);
}

TEST(MemberStep, WritesEveryMemberOnceAndNothingOfANonMember) {
  testing::RandomProblems gen(33);
  std::mt19937 rng(33);
  std::int64_t refed = 0;
  std::int64_t left_out = 0;
  for (int i = 0; i < 40; ++i) {
    const auto [engines, sources, problem, cluster] = testing::random_engine_case(gen);
    auto m = consecutive_engines(sources, problem.destination_ranks(), problem.destination_ranks() / engines)
                 .value();
    m.members = testing::random_members(engines, rng);
    for (const auto name : strategy_names()) {
      SCOPED_TRACE(::testing::Message() << "case " << i << ", " << name);
      const auto full = make_plan(name, problem, cluster, PlanOptions{.chunk = Bytes{40}}).value();
      const auto step = member_step(full, m, none_gone(full));
      ASSERT_TRUE(step) << step.error().message;
      ASSERT_TRUE(validate_structure(step->plan)) << validate_structure(step->plan).error().message;
      ASSERT_EQ(step->full_id.size(), step->plan.transfers.size());
      const auto member = [&](Rank r) {
        const auto e = m.engine_of[static_cast<std::size_t>(r.value)];
        return e == kNoEngine || m.members[static_cast<std::size_t>(e)];
      };
      for (const Transfer& t : step->plan.transfers) {
        EXPECT_TRUE(member(t.sender) && member(t.receiver)) << "transfer " << t.id;
        const auto from = step->full_id[static_cast<std::size_t>(t.id)];
        if (from != kRefed) {
          const Transfer& original = full.transfers[static_cast<std::size_t>(from)];
          EXPECT_EQ(t.sender, original.sender);
          EXPECT_EQ(t.receiver, original.receiver);
          EXPECT_EQ(t.bytes, original.bytes);
          continue;
        }
        ++refed;
        ASSERT_LT(t.sender.value, sources);
        for (const Segment& s : t.segments) {
          const auto held = problem.tensors()[s.tensor].source.local_box(t.sender);
          ASSERT_TRUE(held && held->contains(s.box))
              << "re-fed transfer " << t.id << " " << s.box.to_string();
        }
      }
      left_out += static_cast<std::int64_t>(full.transfers.size()) -
                  std::ranges::count_if(step->full_id, [](std::int32_t f) { return f != kRefed; });
      for (std::int32_t r = sources; r < full.world_size(); ++r)
        if (member(Rank{r})) EXPECT_EQ(written_once(problem, step->plan, Rank{r}), "");
      std::vector<std::int32_t> want;
      for (std::int32_t e = 0; e < engines; ++e)
        if (m.members[static_cast<std::size_t>(e)]) want.push_back(e);
      EXPECT_EQ(step->engines.completed, want);
      EXPECT_TRUE(step->engines.missed.empty());
      // The planner's own check agrees: valid against the problem cut to the members.
      const auto cut = members_problem(problem, MemberEngines{.engines = engines, .members = want}).value();
      const auto valid = validate(step->plan, cut);
      EXPECT_TRUE(valid) << valid.error().message;
    }
  }
  // Not vacuous: some steps left transfers out, and some members' data came through a non-member.
  EXPECT_GT(left_out, 0);
  EXPECT_GT(refed, 0);
}

// A rank known dead before the step (2 training ranks, 3 engines of 2 ranks): nothing moves to or
// from it or its engine, which misses the step; a dead training rank takes out the engines that
// needed data only it held. Every engine reported completed has every element written once.
TEST(MemberStep, ARankGoneBeforeTheStepCostsOnlyWhatNeededIt) {
  int inference_gone = 0;
  testing::for_each_one_rank_gone(
      36, 10, 0, [&](const ReshardProblem& problem, const Plan& full, const std::vector<bool>& gone) {
        const auto m = consecutive_engines(2, 6, 2).value();
        const auto step = member_step(full, m, gone).value();
        const auto excluded = excluded_ranks(m, gone);
        for (const Transfer& t : step.plan.transfers)
          EXPECT_FALSE(excluded[static_cast<std::size_t>(t.sender.value)] ||
                       excluded[static_cast<std::size_t>(t.receiver.value)])
              << "transfer " << t.id;
        const auto dead = static_cast<std::int32_t>(std::ranges::find(gone, true) - gone.begin());
        if (dead >= 2) {
          ++inference_gone;
          EXPECT_EQ(step.engines.missed, std::vector<std::int32_t>{(dead - 2) / 2});
        }
        for (const auto e : step.engines.completed)
          for (const Rank r : {Rank{2 + 2 * e}, Rank{3 + 2 * e}})
            EXPECT_EQ(written_once(problem, step.plan, r), "");
      });
  EXPECT_GT(inference_gone, 0);
}

TEST(MemberStep, EveryEngineAMemberKeepsTheFullPlan) {
  testing::RandomProblems gen(34);
  const auto [engines, sources, problem, cluster] = testing::random_engine_case(gen);
  const auto full = make_plan("refit", problem, cluster, PlanOptions{.chunk = Bytes{40}}).value();
  const auto m =
      consecutive_engines(sources, problem.destination_ranks(), problem.destination_ranks() / engines)
          .value();
  const auto step = member_step(full, m, none_gone(full)).value();
  EXPECT_EQ(step.plan, full);
  EXPECT_EQ(step.engines.completed.size(), static_cast<std::size_t>(engines));
}

TEST(MemberStep, RefusesAMembershipOfAnotherWorldNamingIt) {
  testing::RandomProblems gen(35);
  const auto [engines, sources, problem, cluster] = testing::random_engine_case(gen);
  const auto full = make_plan("direct", problem, cluster, PlanOptions{}).value();
  const auto m = consecutive_engines(sources + 1, problem.destination_ranks(), 1).value();
  const auto step = member_step(full, m, none_gone(full));
  ASSERT_FALSE(step);
  EXPECT_NE(step.error().message.find("the plan has " + std::to_string(full.world_size()) + " ranks"),
            std::string::npos)
      << step.error().message;
}

}  // namespace
}  // namespace refit
