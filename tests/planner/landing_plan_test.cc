// Plans of weights quantized at their landing ranks (core/quantization.h): bf16 to one replica,
// a quantize step on each of its ranks, fp8 values and scales from there to the other replicas.
#include <gtest/gtest.h>

#include <algorithm>
#include <sstream>

#include "error_code.h"
#include "landing_problem.h"
#include "refit/planner/plan_json.h"
#include "refit/planner/plan_stats.h"
#include "refit/planner/strategy.h"
#include "test_cluster.h"

namespace refit {
namespace {

using testing::make_test_cluster;

// The weight "w" in rows of 200 on training ranks 0, 1 (node 0), which cuts block row 1; three
// engines of two ranks (2..7), one per node, split it by columns.
ReshardProblem landing_problem() { return testing::landing_test_problem(3, 2); }

PlacedCluster four_nodes() { return make_test_cluster(4, 2, 2, 6); }

Plan plan_of(std::string_view strategy, const ReshardProblem& p, const PlacedCluster& c) {
  auto plan = make_plan(strategy, p, c);
  EXPECT_TRUE(plan) << strategy << ": " << plan.error().message;
  if (!plan) return {};
  auto ok = validate(*plan, p);
  EXPECT_TRUE(ok) << strategy << ": " << ok.error().message;
  return *plan;
}

std::vector<const Transfer*> quantize_steps(const Plan& plan) {
  std::vector<const Transfer*> out;
  for (const auto& t : plan.transfers)
    if (t.quantizes()) out.push_back(&t);
  return out;
}

TEST(LandingPlan, Bf16ReachesOneEngineAndFp8TheOthers) {
  const auto p = landing_problem();
  const auto c = four_nodes();
  const auto plan = plan_of("refit", p, c);
  const auto s = compute_stats(plan, c);
  // Engine 0 (ranks 2, 3) gets the weight in bf16: 256*512*2 = 262144 bytes. Each of its ranks
  // quantizes its half; engines 1 and 2 each get fp8 values 256*512 = 131072 bytes and the
  // 2x4 fp32 scales, 32 bytes. Network: 262144 + 2 * 131104 = 524352 bytes, where bf16 to all
  // three engines would be 3 * 262144 = 786432.
  EXPECT_EQ(s.network_bytes.value, 524352);
  EXPECT_EQ(s.network_bytes_unquantized.value, 786432);
  const auto steps = quantize_steps(plan);
  ASSERT_EQ(steps.size(), 2u);
  for (const Transfer* step : steps) {
    EXPECT_TRUE(step->sender == Rank{2} || step->sender == Rank{3});
    EXPECT_EQ(step->link, LinkKind::kLocal);
    // 256x256 fp8 values and the 2x2 scales of its column half: 65536 + 16 bytes.
    EXPECT_EQ(step->bytes.value, 65536 + 16);
    for (const auto& seg : step->segments)
      if (seg.tensor == 0)
        EXPECT_EQ(plan.transfers[static_cast<std::size_t>(seg.via)].segments[0].tensor, 2u);
  }
  // What leaves engine 0 forwards from its steps, never from a source shard.
  for (const auto& t : plan.transfers)
    for (const auto& seg : t.segments)
      if (seg.tensor < 2 && !t.quantizes()) EXPECT_NE(seg.via, kFromSourceShard) << "transfer " << t.id;
}

TEST(LandingPlan, EveryStrategyPlansIt) {
  const auto p = landing_problem();
  const auto c = four_nodes();
  for (const auto& info : strategies()) {
    if (!info.sends_from_holders) {
      // gather-broadcast's ring starts at training rank 0, which holds no fp8: refused, naming why.
      const auto refused = make_plan(info, p, c);
      ASSERT_FALSE(refused);
      EXPECT_EQ(refused.error().code, ErrorCode::kUnsupported);
      EXPECT_NE(refused.error().message.find("--quantize-at receiver"), std::string::npos);
      continue;
    }
    const auto plan = plan_of(info.name, p, c);
    EXPECT_EQ(quantize_steps(plan).size(), 2u) << info.name;
  }
}

TEST(LandingPlan, NoReplicasMeansOnlyQuantizeSteps) {
  // One engine: it is its own landing replica, and nothing leaves it.
  const auto p = testing::landing_test_problem(1, 2);
  const auto c = make_test_cluster(2, 2, 2, 2);
  const auto plan = plan_of("refit", p, c);
  EXPECT_EQ(quantize_steps(plan).size(), 2u);
  EXPECT_EQ(compute_stats(plan, c).network_bytes.value, 256 * 512 * 2);
}

TEST(LandingPlan, RoundTripsThroughJson) {
  // The landing copy's "landing_of" and the steps (local, to itself) come back as they were.
  const auto p = landing_problem();
  const auto plan = plan_of("refit", p, four_nodes());
  std::ostringstream out;
  write_plan_json(plan, out);
  const auto back = parse_plan_json(out.str());
  ASSERT_TRUE(back) << back.error().message;
  EXPECT_EQ(*back, plan);
  EXPECT_EQ(back->tensors[2].quantization->landing_of, "w");
  EXPECT_TRUE(validate(*back, p));
}

class LandingValidate : public ::testing::Test {
 protected:
  ReshardProblem problem = landing_problem();
  PlacedCluster cluster = four_nodes();
  Plan plan = plan_of("refit", problem, cluster);

  Transfer& first_step() {
    return *std::ranges::find_if(plan.transfers, [](const Transfer& t) { return t.quantizes(); });
  }
  std::string error_of(const Plan& p) const {
    const auto r = validate(p, problem);
    return r ? std::string() : r.error().message;
  }
};

TEST_F(LandingValidate, ValuesSentAsASourceAreRefused) {
  for (auto& t : plan.transfers)
    if (!t.quantizes() && t.segments[0].tensor == 0) {
      t.segments[0].via = kFromSourceShard;
      break;
    }
  EXPECT_NE(error_of(plan).find("as a source, but a quantize step makes it"), std::string::npos)
      << error_of(plan);
}

TEST_F(LandingValidate, AStepMissingPartOfABlockCannotMakeItsScales) {
  auto& step = first_step();
  // Drop one values segment (or shrink the only one): the scales of its blocks lack their values.
  auto& values = step.segments.front();
  values.box.extent[0] -= 1;
  step.bytes = Bytes{0};
  for (const auto& s : step.segments) step.bytes += plan.segment_bytes(s);
  EXPECT_NE(error_of(plan).find("need the values of"), std::string::npos) << error_of(plan);
}

TEST_F(LandingValidate, AStepMakesTheScalesOfTheValuesItMakes) {
  // Without its scales segment a step's values would go unquantized: the executors quantize the
  // blocks a step's scales name.
  auto& step = first_step();
  std::erase_if(step.segments, [](const Segment& s) { return s.tensor == 1; });
  step.bytes = Bytes{0};
  for (const auto& s : step.segments) step.bytes += plan.segment_bytes(s);
  EXPECT_NE(error_of(plan).find("need the scales of [0:2, 0:2] made in the same step"), std::string::npos)
      << error_of(plan);
}

TEST_F(LandingValidate, AStepOfATensorNotMadeAtLandingIsRefused) {
  auto& step = first_step();
  step.segments.front().tensor = 2;  // the landing copy, which a step does not make
  const auto r = validate_structure(plan);
  ASSERT_FALSE(r);
  EXPECT_NE(r.error().message.find("not made at landing ranks"), std::string::npos) << r.error().message;
  first_step().segments.front().tensor = 0;
  first_step().link = LinkKind::kNvlink;
  EXPECT_NE(error_of(plan).find("only a quantize step, over local"), std::string::npos) << error_of(plan);
}

TEST_F(LandingValidate, AStepWhoseViaDidNotBringTheCopyIsRefused) {
  auto& step = first_step();
  for (auto& s : step.segments)
    if (s.via != kFromSourceShard) s.via = kFromSourceShard;
  EXPECT_NE(error_of(plan).find("values come from a landing copy's transfer"), std::string::npos)
      << error_of(plan);
}

}  // namespace
}  // namespace refit
