// A requested placement=round_robin is resolved as vLLM resolves it (determine_expert_placement_
// strategy, vLLM 0.12-0.34): kept only with expert groups (n_group > 1), EP over several ranks,
// and, when dp > 1 makes its MoE layers exchange tokens all-to-all, on the deepep_low_latency or
// nixl_ep backend. The table is what vLLM 0.33.0's own function returned for the same inputs
// (docs/frameworks.md); tests/python/integrations hold refit to the function itself.
#include "refit/models/expert_placement.h"

#include <gtest/gtest.h>

namespace refit::models {
namespace {

ModelSpec moe(std::int64_t groups) {
  ModelSpec m;
  m.name = "moe";
  m.num_experts = 8;
  m.expert_groups = groups;
  return m;
}

ExpertPlacement resolved(std::int64_t groups, const char* infer) {
  return resolve_expert_placement(moe(groups), parse_vllm(infer).value()).infer.placement;
}

TEST(ExpertPlacement, RoundRobinIsKeptWhereVllmKeepsItAndLinearElsewhere) {
  constexpr auto kRound = ExpertPlacement::kRoundRobin, kLinear = ExpertPlacement::kLinear;
  // vLLM 0.33.0: dp=1, allgather_reducescatter, 8 groups -> round_robin.
  EXPECT_EQ(resolved(8, "tp=4,ep=on,placement=round_robin"), kRound);
  // dp=4, allgather_reducescatter, 8 groups -> linear (the all2all backend).
  EXPECT_EQ(resolved(8, "tp=1,dp=4,ep=on,placement=round_robin"), kLinear);
  // dp=4, deepep_low_latency, 8 groups -> round_robin; nixl_ep too (0.22+).
  EXPECT_EQ(resolved(8, "tp=1,dp=4,ep=on,placement=round_robin,all2all=deepep_low_latency"), kRound);
  EXPECT_EQ(resolved(8, "tp=1,dp=4,ep=on,placement=round_robin,all2all=nixl_ep"), kRound);
  // dp=4, deepep_low_latency, no groups (None) -> linear; one group -> linear.
  EXPECT_EQ(resolved(1, "tp=1,dp=4,ep=on,placement=round_robin,all2all=deepep_low_latency"), kLinear);
  EXPECT_EQ(resolved(1, "tp=4,ep=on,placement=round_robin"), kLinear);
  // Linear asked, linear kept, whatever else.
  EXPECT_EQ(resolved(8, "tp=4,ep=on"), kLinear);
}

TEST(ExpertPlacement, AFallbackSaysWhyAndTheLayoutOtherwiseStaysAsGiven) {
  const auto r =
      resolve_expert_placement(moe(1), parse_vllm("tp=2,dp=2,ep=on,placement=round_robin").value());
  ASSERT_TRUE(r.note);
  EXPECT_NE(
      r.note->find("vLLM falls back to linear expert placement (vLLM keeps it only for models with several "
                   "expert groups (n_group > 1), and moe has 1)"),
      std::string::npos)
      << *r.note;
  EXPECT_EQ(to_string(r.infer), "tp=2,dp=2,ep=on");
  const auto all2all =
      resolve_expert_placement(moe(8), parse_vllm("tp=2,dp=2,ep=on,placement=round_robin").value());
  ASSERT_TRUE(all2all.note);
  EXPECT_NE(all2all.note->find("not all2all=allgather_reducescatter"), std::string::npos) << *all2all.note;
  EXPECT_FALSE(resolve_expert_placement(moe(8), parse_vllm("tp=4,ep=on,placement=round_robin").value()).note);
}

TEST(ExpertPlacement, TheAll2allKeyTakesVllmsBackendsAndRoundTrips) {
  EXPECT_EQ(parse_vllm("tp=2").value().all2all, "allgather_reducescatter");
  const auto c = parse_vllm("tp=2,dp=2,ep=on,all2all=deepep_low_latency").value();
  EXPECT_EQ(to_string(c), "tp=2,dp=2,ep=on,all2all=deepep_low_latency");
  EXPECT_EQ(parse_vllm(to_string(c)).value().all2all, "deepep_low_latency");
  const auto bad = parse_vllm("tp=2,all2all=deepep");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("all2all=deepep: expected one of vLLM's all2all backends"),
            std::string::npos);
}

}  // namespace
}  // namespace refit::models
