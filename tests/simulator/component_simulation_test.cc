// simulate_plan_by_components against simulate_plan of the whole plan: components share no
// rank and no resource, so with the simulator's tolerances at 0 each runs exactly as it does
// beside the others and the plan's time is the slowest one's (to rounding: 1e-9 relative).
#include <sstream>

#include <gtest/gtest.h>

#include "component_signature.h"
#include "hand_plans.h"
#include "model_problems.h"
#include "plan_components.h"
#include "random_problems.h"
#include "refit/planner/strategy.h"
#include "refit/simulator/component_simulation.h"
#include "refit/simulator/deployment.h"
#include "test_cluster.h"

namespace refit {
namespace {

const PlanSimulationOptions kExact{.rate_tolerance = 0, .instant = 0};

// Every resource that carried bytes, in the whole simulation's order: each copy of a component
// simulated once carries what the simulated one did on its own GPUs, NICs and domains, so names
// and bytes are the whole simulation's exactly; utilisation is bytes / (capacity x the plan's
// time), equal to rounding as the times are.
void expect_same_resources(const std::vector<ResourceReport>& whole,
                           const std::vector<ResourceReport>& parts) {
  ASSERT_EQ(parts.size(), whole.size());
  for (std::size_t i = 0; i < whole.size(); ++i) {
    SCOPED_TRACE(whole[i].name);
    EXPECT_EQ(parts[i].name, whole[i].name);
    EXPECT_EQ(parts[i].bytes.value, whole[i].bytes.value);
    EXPECT_NEAR(parts[i].utilisation, whole[i].utilisation, 1e-9 * whole[i].utilisation);
  }
}

void expect_same_prediction(const Plan& plan, const ReshardProblem& p, const PlacedCluster& c) {
  const auto whole = simulate_plan(plan, p, c, kExact).value();
  const auto parts = simulate_plan_by_components(plan, p, c, kExact).value();
  EXPECT_NEAR(parts.plan.predicted.value, whole.predicted.value, 1e-9 * whole.predicted.value);
  EXPECT_EQ(parts.plan.tasks, whole.tasks);
  expect_same_resources(whole.resources, parts.plan.resources);
}

// Qwen3-30B-A3B, 4 copies of EP8 (32 GPUs, 4 nodes) -> 4 engines of TP8 (4 nodes): each
// engine's domain takes every piece from one training copy (holder_share) and only domains fed
// by one NIC forward to each other, so the plan falls into 4 components, one per (copy, engine).
testing::ModelProblem four_copies_to_four_engines() {
  return testing::model_problem("qwen3-30b-a3b", "ep=8,dp=32", "tp=8,engines=4", "dgx-h100");
}

TEST(ComponentSimulation, ARefitPlanOfFourCopiesToFourEnginesIsOneComponentSimulatedOnce) {
  // The copies' ranks are the first copy's shifted by 8 (training) and by 8 (inference); the
  // balance solves each part alike and each part's rotation counts from its own first ranks
  // (rotation_origin.h), so the 4 components are equal up to renumbering: one simulation, whose
  // tasks stand for 4 times as many.
  const auto mp = four_copies_to_four_engines();
  const auto plan = make_plan("refit", mp.problem, mp.cluster).value();
  const auto parts = simulate_plan_by_components(plan, mp.problem, mp.cluster).value();
  EXPECT_EQ(parts.components, 4);
  EXPECT_EQ(parts.simulated, 1);
  EXPECT_EQ(parts.plan.tasks % 4, 0);
  expect_same_prediction(plan, mp.problem, mp.cluster);
}

TEST(ComponentSimulation, EveryCopyReportsItsOwnResourcesAsTheWholePlanDoes) {
  // The 4 copies each load their own GPUs' NVLink and copy engines and their own NICs; simulated
  // once, the copies' resources are the simulated one's renamed to each copy's GPUs and NICs.
  // With 2 GPUs behind a NIC (nics_per_node=4) a NIC's counterpart is found through whichever of
  // its ranks comes first; on GB200 NVL72 racks (gpus_per_domain=16: 4 nodes a domain) a
  // domain holds several nodes.
  for (const char* cluster : {"dgx-h100", "dgx-h100:nics_per_node=4", "gb200-nvl72:gpus_per_domain=16"}) {
    SCOPED_TRACE(cluster);
    const auto mp = testing::model_problem("qwen3-30b-a3b", "ep=8,dp=32", "tp=8,engines=4", cluster);
    const auto plan = make_plan("refit", mp.problem, mp.cluster).value();
    const auto parts = simulate_plan_by_components(plan, mp.problem, mp.cluster, kExact).value();
    EXPECT_GT(parts.components, 1);
    EXPECT_EQ(parts.simulated, 1);
    expect_same_prediction(plan, mp.problem, mp.cluster);
  }
}

// 8 MiB replicated on training ranks 0 and 1 and on inference ranks 2..5, one GPU a node: rank
// 0 sends it to 2, which relays it to 3; rank 1 to 4, which relays it to 5. The two chains are
// the same up to renumbering: 1 MiB chunks, so each takes alpha + 8U through its NICs and the
// relay one chunk and alpha behind: 2 alpha + 9U.
struct TwoChains {
  ReshardProblem problem;
  Plan plan;
};

TwoChains two_chains() {
  using testing::kCols;
  const Shape shape{8 * 1024, kCols};
  auto problem =
      ReshardProblem::make(
          {testing::make_reshard("w", shape, testing::make_layout(shape, {2}, testing::rank_range(0, 2), "R"),
                                 testing::make_layout(shape, {4}, testing::rank_range(2, 4), "R"))},
          2, 4)
          .value();
  auto plan = testing::plan_of(
      problem, {testing::transfer(0, 0, 2, 0, 0, 8), testing::transfer(1, 1, 4, 0, 0, 8),
                testing::transfer(2, 2, 3, 0, 0, 8, 0), testing::transfer(3, 4, 5, 0, 0, 8, 1)});
  return {std::move(problem), std::move(plan)};
}

TEST(ComponentSimulation, ChainsThatAreTheSameUpToRenumberingAreSimulatedOnce) {
  const auto [p, plan] = two_chains();
  const auto c = testing::make_test_cluster(6, 1, 2, 4);
  const auto parts = simulate_plan_by_components(plan, p, c).value();
  EXPECT_EQ(parts.components, 2);
  EXPECT_EQ(parts.simulated, 1);
  EXPECT_NEAR(parts.plan.predicted.value, 2 * testing::kAlpha + 9 * testing::kU, 1e-9);
  expect_same_prediction(plan, p, c);
  // Alike components are no reason to refuse.
  EXPECT_TRUE(simulate_plan_by_components(plan, p, c, {}, DistinctComponents::kRefuse));
}

TEST(ComponentSimulation, AComponentOnASlowerNicIsSimulatedApartAndSetsTheTime) {
  // Rank 5's NIC at half speed: the second chain's signature differs, so both are simulated,
  // and the plan takes as long as the second, as the whole simulation says.
  const auto [p, plan] = two_chains();
  const auto c = testing::make_test_cluster(6, 1, 2, 4);
  auto spec = c.cluster().spec();
  spec.nics.back().bandwidth = spec.nics.back().bandwidth * 0.5;
  const auto slow = PlacedCluster::make(Cluster::make(spec).value(), c.ranks()).value();
  const auto parts = simulate_plan_by_components(plan, p, slow).value();
  EXPECT_EQ(parts.components, 2);
  EXPECT_EQ(parts.simulated, 2);
  EXPECT_GT(parts.plan.predicted.value, 2 * testing::kAlpha + 9 * testing::kU + 1e-6);
  expect_same_prediction(plan, p, slow);
  // Asked to refuse distinct components, it does so (before simulating), naming them.
  const auto refused = simulate_plan_by_components(plan, p, slow, {}, DistinctComponents::kRefuse);
  ASSERT_FALSE(refused);
  EXPECT_EQ(refused.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(refused.error().message.find("2 components are 2 distinct ones"), std::string::npos)
      << refused.error().message;
}

TEST(ComponentSimulation, EveryTransferIsInExactlyOneComponentAndComponentsShareNoRank) {
  // The partition itself, checked by brute force: each transfer once, and no rank in two.
  const auto mp = four_copies_to_four_engines();
  const auto plan = make_plan("refit", mp.problem, mp.cluster).value();
  const auto parts = sim::plan_components(plan, mp.cluster);
  std::vector<int> seen(plan.transfers.size(), 0);
  std::vector<int> owner(static_cast<std::size_t>(plan.world_size()), -1);
  for (std::size_t c = 0; c < parts.size(); ++c)
    for (const auto id : parts[c]) {
      ++seen[static_cast<std::size_t>(id)];
      for (const Rank r : {plan.transfers[static_cast<std::size_t>(id)].sender,
                           plan.transfers[static_cast<std::size_t>(id)].receiver}) {
        auto& o = owner[static_cast<std::size_t>(r.value)];
        EXPECT_TRUE(o < 0 || o == static_cast<int>(c)) << "rank " << r.value;
        o = static_cast<int>(c);
      }
    }
  for (const int s : seen) EXPECT_EQ(s, 1);
}

TEST(ComponentSimulation, RandomProblemsPredictAsTheWholePlanDoes) {
  // Property: on random reshards (any number of components, often one) the decomposed
  // prediction is the whole one for every strategy.
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    // 4 training ranks and 8 inference ranks on 6 nodes of 2 GPUs, each node its own domain.
    const auto p = testing::RandomProblems(seed).problem(4, 8, 6, 64);
    const auto c = testing::make_test_cluster(6, 2, p.source_ranks(), p.destination_ranks());
    for (const char* strategy : {"refit", "direct"}) {
      SCOPED_TRACE(::testing::Message() << "seed " << seed << ", " << strategy);
      expect_same_prediction(make_plan(strategy, p, c).value(), p, c);
    }
  }
}

TEST(ComponentSimulation, AnOversubscribedFabricJoinsEveryRankOfADomain) {
  // Uplinks are per domain: ranks of one domain share them, so with oversubscription > 1 every
  // transfer touching a domain falls in that domain's component, and the prediction still
  // matches the whole plan's.
  const auto mp = four_copies_to_four_engines();
  auto spec = mp.cluster.cluster().spec();
  spec.fabric.oversubscription = 4.0;
  const auto over = PlacedCluster::make(Cluster::make(spec).value(), mp.cluster.ranks()).value();
  const auto plan = make_plan("refit", mp.problem, over).value();
  expect_same_prediction(plan, mp.problem, over);
}

// Every pair of components of `plan`: the streamed comparison says "same" exactly when the two
// whole signatures are equal, and a kept signature one word short or one word long never matches.
void expect_streamed_comparison_is_the_whole_one(const Plan& plan, const ReshardProblem& p,
                                                 const PlacedCluster& c) {
  const auto parts = sim::plan_components(plan, c);
  sim::SignatureContext context(p, c);
  std::vector<std::vector<std::int64_t>> whole;
  for (const auto& ids : parts) whole.push_back(sim::component_signature(plan, ids, context));
  for (std::size_t a = 0; a < parts.size(); ++a) {
    for (std::size_t b = 0; b < parts.size(); ++b)
      EXPECT_EQ(sim::has_signature(plan, parts[a], context, whole[b]), whole[a] == whole[b])
          << a << " vs " << b;
    auto shorter = whole[a];
    shorter.pop_back();
    auto longer = whole[a];
    longer.push_back(0);
    EXPECT_FALSE(sim::has_signature(plan, parts[a], context, shorter));
    EXPECT_FALSE(sim::has_signature(plan, parts[a], context, longer));
  }
}

TEST(ComponentSignature, TheStreamedComparisonIsTheWholeSignaturesEquality) {
  // Alike components (4 copies; two chains), unlike ones (a slower NIC) and random reshards.
  const auto mp = four_copies_to_four_engines();
  expect_streamed_comparison_is_the_whole_one(make_plan("refit", mp.problem, mp.cluster).value(), mp.problem,
                                              mp.cluster);
  const auto [chains, plan] = two_chains();
  const auto c = testing::make_test_cluster(6, 1, 2, 4);
  expect_streamed_comparison_is_the_whole_one(plan, chains, c);
  auto spec = c.cluster().spec();
  spec.nics.back().bandwidth = spec.nics.back().bandwidth * 0.5;
  expect_streamed_comparison_is_the_whole_one(
      plan, chains, PlacedCluster::make(Cluster::make(spec).value(), c.ranks()).value());
  for (std::uint64_t seed = 0; seed < 12; ++seed) {
    SCOPED_TRACE(::testing::Message() << "seed " << seed);
    const auto p = testing::RandomProblems(seed).problem(4, 8, 6, 64);
    const auto random = testing::make_test_cluster(6, 2, p.source_ranks(), p.destination_ranks());
    expect_streamed_comparison_is_the_whole_one(make_plan("direct", p, random).value(), p, random);
  }
}

TEST(ComponentSignature, PositionsSharedByTensorsOnOneMeshAreEachTensorsOwn) {
  // Tensors whose meshes list the same ranks share one array of positions: every rank's position
  // in every tensor's mesh on either side is still the one a scan of that mesh finds.
  const auto mp = four_copies_to_four_engines();
  for (std::uint64_t seed = 0; seed < 4; ++seed) {
    const auto random = testing::RandomProblems(seed).problem(4, 8, 6, 64);
    for (const ReshardProblem* p : {&mp.problem, &random}) {
      const auto c = p == &mp.problem
                         ? mp.cluster
                         : testing::make_test_cluster(6, 2, p->source_ranks(), p->destination_ranks());
      sim::SignatureContext context(*p, c);
      for (std::uint32_t t = 0; t < p->tensors().size(); ++t)
        for (const bool source : {true, false})
          for (std::int32_t r = 0; r < p->world_size(); ++r) {
            const auto& spec = p->tensors()[t];
            EXPECT_EQ(context.position(t, source, Rank(r)),
                      (source ? spec.source : spec.destination).mesh().position_of_rank(Rank(r)))
                << "tensor " << t << ", rank " << r;
          }
    }
  }
}

TEST(ComponentSimulation, RefusesATraceAndCallsButOneOfTheWholePlan) {
  // Calls couple ranks across components and a trace would show one component only. Two calls
  // (the plan cut in halves, the second after the first) are refused; refit's executors run the plan as one
  // call that costs nothing of its own, which ends with the last transfer: each component runs under it
  // alone, and the figures are the whole simulation's, the call's own two tasks (start, end) and
  // their events counted once.
  const auto mp = four_copies_to_four_engines();
  const auto plan = make_plan("refit", mp.problem, mp.cluster).value();
  std::ostringstream trace;
  EXPECT_FALSE(simulate_plan_by_components(plan, mp.problem, mp.cluster, {.trace = &trace}));
  const auto ours = deploy(refit_executors(), plan, mp.problem, mp.cluster).value();
  ASSERT_EQ(ours.calls.size(), 1u);
  auto halves = ours;
  auto& first = halves.calls.front().transfers;
  halves.calls.push_back(Call{.label = "second half", .queue = 0, .transfers = {}});
  halves.calls.back().transfers.assign(first.begin() + std::ssize(first) / 2, first.end());
  first.resize(first.size() / 2);
  EXPECT_FALSE(simulate_plan_by_components(plan, mp.problem, mp.cluster, {.calls = &halves}));
  const auto whole = simulate_plan(plan, mp.problem, mp.cluster, {.calls = &ours}).value();
  const auto parts = simulate_plan_by_components(plan, mp.problem, mp.cluster, {.calls = &ours}).value();
  EXPECT_EQ(parts.simulated, 1);
  EXPECT_EQ(parts.plan.predicted.value, whole.predicted.value);
  EXPECT_EQ(parts.plan.tasks, whole.tasks);
  EXPECT_EQ(parts.plan.events, whole.events);
  expect_same_resources(whole.resources, parts.plan.resources);
}

}  // namespace
}  // namespace refit
