// MemberEngines plans (membership.h) against a brute-force reference: on random problems of random
// engines, for a random subset of members derived from every strategy's full plan, every element
// of every member's destination box is written exactly once (counted element by element), no rank
// outside the membership receives or sends anything, and the plan validates against the members'
// problem. A join's plan fills the joining engine exactly once, from ranks that hold what they
// send: training ranks their source boxes, peers their destination boxes; from peers only, the
// training ranks send nothing.
#include <map>

#include <gtest/gtest.h>

#include "engine_problems.h"
#include "refit/core/quantized_problem.h"
#include "refit/planner/membership.h"
#include "refit/planner/strategy.h"
#include "strategy_names.h"
#include "test_cluster.h"

namespace refit {
namespace {

// Writes per element of `box` from `received` (boxes cut to it): the brute-force reference.
std::vector<int> writes(const Box& box, const std::vector<Box>& received) {
  std::vector<int> count(static_cast<std::size_t>(box.volume()), 0);
  for (const Box& r : received) {
    const auto part = intersect(r, box);
    if (!part) continue;
    for (std::int64_t i = 0; i < part->volume(); ++i) {
      std::int64_t at = 0, rest = i;
      std::vector<std::int64_t> coord(part->rank());
      for (std::size_t d = part->rank(); d-- > 0;) {
        coord[d] = part->offset[d] + rest % part->extent[d];
        rest /= part->extent[d];
      }
      for (std::size_t d = 0; d < box.rank(); ++d) at = at * box.extent[d] + (coord[d] - box.offset[d]);
      ++count[static_cast<std::size_t>(at)];
    }
  }
  return count;
}

// Every element of every destination box of `ranks` (global ranks of `problem`) written once by
// `plan`, whose rank r is global rank global[r].
void expect_filled_once(const Plan& plan, const ReshardProblem& problem, const std::vector<Rank>& global,
                        const std::vector<Rank>& ranks) {
  std::map<std::pair<std::int32_t, std::uint32_t>, std::vector<Box>> received;
  for (const auto& t : plan.transfers)
    for (const auto& s : t.segments)
      received[{global[static_cast<std::size_t>(t.receiver.value)].value, s.tensor}].push_back(s.box);
  for (const Rank r : ranks)
    for (std::uint32_t t = 0; t < problem.tensors().size(); ++t) {
      const Box mine = problem.tensors()[t].destination.local_box(r).value();
      if (mine.empty()) continue;
      for (const int n : writes(mine, received[{r.value, t}]))
        ASSERT_EQ(n, 1) << "rank " << r.value << " tensor " << t << " box " << mine.to_string();
    }
}

std::vector<Rank> identity(std::int32_t world) {
  std::vector<Rank> out;
  for (std::int32_t r = 0; r < world; ++r) out.push_back(Rank{r});
  return out;
}

TEST(MemberEngines, RandomSubsetsFillEveryMemberOnceAndNothingElse) {
  testing::RandomProblems gen(33);
  int checked = 0, resent = 0;
  for (int i = 0; i < 400; ++i) {
    const auto [engines, sources, problem, cluster] = testing::random_engine_case(gen);
    const auto world = problem.world_size();
    MemberEngines m{.engines = engines, .members = {}};
    for (std::int32_t e = 0; e < engines; ++e)
      if (gen.uniform(0, 1) == 1) m.members.push_back(e);
    if (m.members.empty()) m.members.push_back(static_cast<std::int32_t>(gen.uniform(0, engines - 1)));
    const auto strategy = strategy_names()[static_cast<std::size_t>(i) % strategy_names().size()];
    SCOPED_TRACE(::testing::Message() << "case " << i << " " << strategy << ", " << m.members.size() << " of "
                                      << engines << " engines");
    const auto full = make_plan(strategy, problem, cluster).value();
    const auto derived = member_plan(full, problem, cluster, m);
    ASSERT_TRUE(derived) << derived.error().message;
    const auto* plan = &derived->plan;
    const auto members = members_problem(problem, m).value();
    const auto ok = validate(*plan, members);
    ASSERT_TRUE(ok) << ok.error().message;
    std::vector<bool> member(static_cast<std::size_t>(world), false);
    std::vector<Rank> member_ranks;
    for (std::int32_t r = 0; r < sources; ++r) member[static_cast<std::size_t>(r)] = true;
    for (const auto e : m.members)
      for (const Rank r : engine_ranks(problem, engines, e)) {
        member[static_cast<std::size_t>(r.value)] = true;
        member_ranks.push_back(r);
      }
    for (const auto& t : plan->transfers) {
      ASSERT_TRUE(member[static_cast<std::size_t>(t.receiver.value)])
          << "transfer " << t.id << " to a non-member";
      ASSERT_TRUE(member[static_cast<std::size_t>(t.sender.value)])
          << "transfer " << t.id << " from a non-member";
    }
    expect_filled_once(*plan, problem, identity(world), member_ranks);
    ++checked;
    resent += derived->resent > 0 ? 1 : 0;
  }
  EXPECT_EQ(checked, 400);
  // Members often took boxes from another engine's GPUs in their domain: those cases test the
  // boxes sent again.
  EXPECT_GT(resent, 40);
}

// With every engine a member nothing came through an absent rank: the member plan is the full plan.
TEST(MemberEngines, EveryEngineAMemberKeepsTheFullPlan) {
  testing::RandomProblems gen(7);
  const auto problem = testing::engine_problem(gen, 3, 3, 2, 3);
  const auto cluster = testing::make_test_cluster(3, 3, 3, 6);
  const auto full = make_plan("refit", problem, cluster).value();
  const auto derived =
      member_plan(full, problem, cluster, MemberEngines{.engines = 3, .members = {0, 1, 2}}).value();
  EXPECT_EQ(derived.plan, full);
  EXPECT_EQ(derived.resent, 0);
}

TEST(MemberEngines, BadMembershipsNameTheEngine) {
  testing::RandomProblems gen(8);
  const auto problem = testing::engine_problem(gen, 2, 2, 2, 1);
  const auto out = members_problem(problem, MemberEngines{.engines = 2, .members = {0, 2}});
  ASSERT_FALSE(out);
  EXPECT_EQ(out.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(out.error().message.find("member engine 2"), std::string::npos) << out.error().message;
  const auto count = members_problem(problem, MemberEngines{.engines = 3, .members = {0}});
  ASSERT_FALSE(count);
  EXPECT_NE(count.error().message.find("3 engines"), std::string::npos) << count.error().message;
  EXPECT_FALSE(members_problem(problem, MemberEngines{.engines = 2, .members = {1, 1}}));
  EXPECT_FALSE(members_problem(problem, MemberEngines{.engines = 2, .members = {}}));
}

// A destination mesh that shards along its first axis cannot lose an engine (engine 0 would
// hold rows the others do not): the error names the tensor.
TEST(MemberEngines, RefusesAMeshThatDoesNotSeparateEngines) {
  auto spec = make_tensor_spec("w", {4, 2}, DType::kFP32).value();
  auto src = Layout::make({4, 2}, Mesh::make({1}).value(), {Placement::replicate()}).value();
  auto dst = Layout::make({4, 2}, Mesh::make({2}, {Rank{1}, Rank{2}}).value(), {Placement::shard(0)}).value();
  const auto problem =
      ReshardProblem::make(std::vector{TensorReshard{.tensor = spec, .source = src, .destination = dst}}, 1,
                           2)
          .value();
  const auto out = members_problem(problem, MemberEngines{.engines = 2, .members = {1}});
  ASSERT_FALSE(out);
  EXPECT_NE(out.error().message.find("tensor 'w'"), std::string::npos) << out.error().message;
}

// A join in its own rank space: the joining engine (global ranks) filled once; every sender holds
// what it sends in the original problem (training ranks their source box, peers their
// destination box); from peers only no training rank is even in the join's world.
void check_join(const ReshardProblem& problem, const PlacedCluster& cluster, const JoinOptions& o) {
  const auto joined = join_problem(problem, cluster, o);
  ASSERT_TRUE(joined) << joined.error().message;
  // From peers only, no training rank is in the join's world.
  EXPECT_EQ(joined->training_ranks, o.source == JoinSource::kPeers ? 0 : problem.source_ranks());
  const auto plan = make_plan("refit", joined->problem, joined->cluster);
  ASSERT_TRUE(plan) << plan.error().message;
  const auto ok = validate(*plan, joined->problem);
  ASSERT_TRUE(ok) << ok.error().message;
  expect_filled_once(*plan, problem, joined->global, engine_ranks(problem, o.engines, o.joining));
  for (const auto& t : plan->transfers) {
    const Rank from = joined->global[static_cast<std::size_t>(t.sender.value)];
    if (o.source == JoinSource::kPeers) ASSERT_FALSE(problem.is_source(from)) << "transfer " << t.id;
    for (const auto& s : t.segments) {
      if (s.via != kFromSourceShard) continue;
      const auto& spec = problem.tensors()[s.tensor];
      const Box held = (problem.is_source(from) ? spec.source : spec.destination).local_box(from).value();
      ASSERT_TRUE(held.contains(s.box)) << "rank " << from.value << " sends " << s.box.to_string();
    }
  }
}

TEST(MemberEngines, RandomJoinsFillTheJoiningEngineOnceFromHolders) {
  testing::RandomProblems gen(34);
  for (int i = 0; i < 200; ++i) {
    const auto [engines, sources, problem, cluster] = testing::random_engine_case(gen);
    JoinOptions o{.engines = engines,
                  .joining = static_cast<std::int32_t>(gen.uniform(0, engines - 1)),
                  .peers = {},
                  .source = static_cast<JoinSource>(i % 3)};
    for (std::int32_t e = 0; e < engines; ++e)
      if (e != o.joining && (o.peers.empty() || gen.uniform(0, 1) == 1)) o.peers.push_back(e);
    SCOPED_TRACE(::testing::Message() << "case " << i << " joining " << o.joining << " with "
                                      << o.peers.size() << " peers, source " << static_cast<int>(o.source));
    check_join(problem, cluster, o);
  }
}

// From both sides, a weight and its fp8 scales go from the same side: the scales' layouts follow
// the weight's blocks rank by rank, which splitting them would break (refit simulate --join once
// refused every quantized model this way: balancing tensor by tensor, the third weight's scales went
// to the side with fewer bytes). Three 256x512 weights in rows on 2 training ranks, in
// columns on 2 engines of 2 ranks (2-3, 4-5); engine 1 joins from engine 0 and the training ranks.
TEST(MemberEngines, AJoinFromBothSidesSendsAWeightWithItsScales) {
  const Shape w{256, 512};
  const auto reshard = [&](const std::string& name) {
    return testing::make_reshard(name, w, testing::make_layout(w, {2}, testing::rank_range(0, 2), "S0"),
                                 testing::make_layout(w, {2, 2}, testing::rank_range(2, 4), "R,S1"));
  };
  const auto plain =
      ReshardProblem::make({reshard("a.weight"), reshard("b.weight"), reshard("c.weight")}, 2, 4).value();
  for (const auto scheme : {QuantScheme::kFp8Block128, QuantScheme::kMxfp8}) {
    SCOPED_TRACE(std::string(quant_scheme_name(scheme)));
    const auto problem =
        quantize_problem(plain, {.scheme = scheme, .site = QuantSite::kSender}, [](const TensorSpec&) {
          return true;
        }).value();
    const auto cluster = testing::make_test_cluster(3, 2, 2, 4);
    const JoinOptions o{.engines = 2, .joining = 1, .peers = {0}, .source = JoinSource::kBoth};
    check_join(problem, cluster, o);
    const auto joined = join_problem(problem, cluster, o).value();
    std::map<std::string, bool> weight_from_peers;
    for (std::size_t t = 0; t < problem.tensors().size(); ++t)
      weight_from_peers[problem.tensors()[t].tensor.name] = joined.from_peers[t];
    std::int32_t scales = 0;
    for (std::size_t t = 0; t < problem.tensors().size(); ++t) {
      const auto& q = problem.tensors()[t].tensor.quantization;
      if (!q || !q->is_scales()) continue;
      ++scales;
      EXPECT_EQ(joined.from_peers[t], weight_from_peers.at(q->scales_of)) << q->scales_of;
    }
    EXPECT_EQ(scales, 3);
  }
}

TEST(MemberEngines, BadJoinsNameTheEngine) {
  testing::RandomProblems gen(9);
  const auto problem = testing::engine_problem(gen, 2, 3, 1, 1);
  const auto cluster = testing::make_test_cluster(5, 1, 2, 3);
  auto named = [&](const JoinOptions& o, const std::string& text) {
    const auto out = join_problem(problem, cluster, o);
    ASSERT_FALSE(out);
    EXPECT_NE(out.error().message.find(text), std::string::npos) << out.error().message;
  };
  named({.engines = 3, .joining = 3, .peers = {0}, .source = JoinSource::kBoth}, "joining engine 3");
  named({.engines = 3, .joining = 0, .peers = {0}, .source = JoinSource::kBoth}, "engine 0 joins");
  named({.engines = 3, .joining = 0, .peers = {5}, .source = JoinSource::kBoth}, "peer engine 5");
  named({.engines = 3, .joining = 0, .peers = {}, .source = JoinSource::kPeers}, "at least one peer");
}

}  // namespace
}  // namespace refit
