#include <tuple>

#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/models/parallel_config.h"

namespace refit::models {
namespace {

TEST(ParseMegatron, SizesAndDerivedDp) {
  // dp left out: the smallest making tp*cp*dp a multiple of ep*etp -> 16/(4*1) = 4, so
  // 4*1*4*8 = 128 ranks; edp = tp*cp*dp/(ep*etp) = 1.
  auto c = parse_megatron("tp=4,pp=8,ep=16,etp=1");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->dp, 4);
  EXPECT_EQ(c->world(), 128);
  EXPECT_EQ(c->stage_size(), 16);
  EXPECT_EQ(c->edp(), 1);
  EXPECT_EQ(to_string(*c), "tp=4,pp=8,ep=16,etp=1,cp=1,dp=4");
}

TEST(ParseMegatron, VocabDivisibleByDefaultsToMegatronLmsAndOffIsZero) {
  EXPECT_EQ(parse_megatron("tp=2").value().vocab_divisible_by, 128);
  const auto off = parse_megatron("tp=2,vocab_divisible_by=off").value();
  EXPECT_EQ(off.vocab_divisible_by, 0);
  EXPECT_EQ(to_string(off), "tp=2,pp=1,ep=1,etp=2,cp=1,dp=1,vocab_divisible_by=off");
  EXPECT_EQ(parse_megatron("vocab_divisible_by=0").value().vocab_divisible_by, 0);
  EXPECT_EQ(to_string(parse_megatron("vocab_divisible_by=64").value()),
            "tp=1,pp=1,ep=1,etp=1,cp=1,dp=1,vocab_divisible_by=64");
  EXPECT_EQ(testing::error_code(parse_megatron("vocab_divisible_by=-1")), ErrorCode::kOutOfRange);
}

TEST(ParseMegatron, LayerSpecAndGluInterleave) {
  EXPECT_FALSE(parse_megatron("tp=2").value().local_spec);
  EXPECT_FALSE(parse_megatron("tp=2,spec=te").value().local_spec);
  const auto local = parse_megatron("tp=2,spec=local").value();
  EXPECT_TRUE(local.local_spec);
  EXPECT_EQ(to_string(local), "tp=2,pp=1,ep=1,etp=2,cp=1,dp=1,spec=local");
  const auto interleaved = parse_megatron("ep=2,glu_interleave=32").value();
  EXPECT_EQ(interleaved.glu_interleave, 32);
  EXPECT_EQ(to_string(interleaved), "tp=1,pp=1,ep=2,etp=1,cp=1,dp=2,glu_interleave=32");
  EXPECT_EQ(parse_megatron("tp=2").value().glu_interleave, 0);
  const auto bad = parse_megatron("spec=legacy");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("spec=legacy: expected te"), std::string::npos) << bad.error().message;
}

TEST(ParseMegatron, ExpertTensorParallelDefaultsToTp) {
  // Megatron's expert_tensor_parallel_size defaults to tp: tp=4, ep=16 -> etp = 4, ep*etp = 64,
  // dp = lcm(4, 64)/4 = 16, 4*16*8 = 512 ranks, edp = 64/64 = 1.
  auto c = parse_megatron("tp=4,pp=8,ep=16");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->etp, 4);
  EXPECT_EQ(c->dp, 16);
  EXPECT_EQ(c->world(), 512);
  EXPECT_EQ(c->edp(), 1);
  EXPECT_EQ(to_string(*c), "tp=4,pp=8,ep=16,etp=4,cp=1,dp=16");
}

TEST(ParseMegatron, PpSixteenEpSixteenIs256Ranks) {
  auto c = parse_megatron("pp=16,ep=16");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->dp, 16);
  EXPECT_EQ(c->world(), 256);
}

TEST(ParseMegatron, DerivedDpUsesTheLeastCommonMultiple) {
  // tp*cp = 4, ep*etp = 6: dp = lcm(4, 6)/4 = 3, so 12 ranks per stage and edp = 2.
  auto c = parse_megatron("tp=4,ep=6,etp=1");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->dp, 3);
  EXPECT_EQ(c->edp(), 2);
  // Dense models: ep=1 leaves dp at 1; cp and etp take part.
  auto d = parse_megatron(" tp=2 , cp=2, etp=2, ep=2 ");
  ASSERT_TRUE(d) << d.error().message;
  EXPECT_EQ(d->dp, 1);
  EXPECT_EQ(d->world(), 4);
}

TEST(ParseMegatron, EmptyMeansOneRankAndEndsAreKept) {
  auto c = parse_megatron("");
  ASSERT_TRUE(c);
  EXPECT_EQ(c->world(), 1);
  auto e = parse_megatron("pp=8,pp_first=11,pp_last=11");
  ASSERT_TRUE(e) << e.error().message;
  EXPECT_EQ(e->pp_first, 11);
  EXPECT_EQ(to_string(*e), "tp=1,pp=8,ep=1,etp=1,cp=1,dp=1,pp_first=11,pp_last=11");
}

TEST(ParseMegatron, VirtualStagesAndLayoutStrings) {
  auto v = parse_megatron("pp=2,vp=2");
  ASSERT_TRUE(v) << v.error().message;
  EXPECT_EQ(v->vp, 2);
  EXPECT_EQ(v->world(), 2);  // virtual stages share their stage's ranks
  EXPECT_EQ(to_string(*v), "tp=1,pp=2,ep=1,etp=1,cp=1,dp=1,vp=2");
  // "Et|(tt|)*2tL" unrolls to Et|tt|tt|tL: 4 virtual stages over pp=2, so vp = 2.
  auto l = parse_megatron("pp=2,layout=Et|(tt|)*2tL");
  ASSERT_TRUE(l) << l.error().message;
  EXPECT_EQ(l->vp, 2);
  EXPECT_EQ(to_string(*l), "tp=1,pp=2,ep=1,etp=1,cp=1,dp=1,vp=2,layout=Et|(tt|)*2tL");
  EXPECT_EQ(to_string(*parse_megatron(to_string(*l))), to_string(*l));
  EXPECT_TRUE(parse_megatron("pp=2,vp=2,layout=Et|(tt|)*2tL"));  // vp agrees with the layout
  EXPECT_EQ(parse_megatron("layout=Ettt*2L")->vp, 1);            // one stage: t*2 is tt
  // Uneven ends with vp: 4 and 2 layers over 2 virtual stages each (Megatron's divisibility).
  EXPECT_TRUE(parse_megatron("pp=4,vp=2,pp_first=4,pp_last=2"));
}

TEST(ParseMegatron, Errors) {
  const std::tuple<const char*, ErrorCode, const char*> cases[] = {
      {"tp=4,xp=2", ErrorCode::kNotFound, "unknown key 'xp'"},
      {"tp=4,tp=2", ErrorCode::kInvalidArgument, "tp: given twice"},
      {"tp=four", ErrorCode::kParse, "tp=four: not an integer"},
      {"tp=99999999999999999999", ErrorCode::kOutOfRange, "tp=99999999999999999999: not an integer"},
      {"tp=0", ErrorCode::kOutOfRange, "tp=0: must be between 1"},
      {"tp", ErrorCode::kParse, "expected key=value"},
      {"tp=4,ep=16,dp=3", ErrorCode::kInvalidArgument,
       "dp=3: tp*cp*dp = 12 is not a multiple of ep*etp = 64"},
      {"tp=1024,pp=1024,dp=1024", ErrorCode::kOutOfRange, "more than"},
      {"pp_first=2", ErrorCode::kInvalidArgument, "pp_first: needs pp >= 2"},
      {"vp=2", ErrorCode::kInvalidArgument, "vp=2: virtual pipeline stages need pp >= 2 (pp=1)"},
      {"pp=4,vp=2,pp_first=3", ErrorCode::kInvalidArgument, "pp_first=3: not a multiple of vp=2"},
      {"pp=2,vp=2,pp_first=2,pp_last=2", ErrorCode::kUnsupported, "no middle stage"},
      {"pp=2,pp_first=1,layout=Et|tL", ErrorCode::kInvalidArgument,
       "layout=Et|tL: cannot be combined with pp_first"},
      {"pp=2,layout=Et|tt|tL", ErrorCode::kInvalidArgument,
       "layout=Et|tt|tL: 3 virtual stages are not a multiple of pp=2"},
      {"pp=2,vp=3,layout=Et|tL", ErrorCode::kInvalidArgument,
       "vp=3: layout=Et|tL has 2 stages over pp=2, so vp = 1"},
      {"layout=Et|tX|L", ErrorCode::kParse, "layout=Et|tX|L: invalid layer character 'X' in stage 'tX'"},
      // Megatron's regex takes "(t" as the group, leaving a '(' that is no layer
      {"layout=E((t)*2)*2L", ErrorCode::kParse, "invalid layer character '('"},
      {"layout=E(t)*99999999999L", ErrorCode::kOutOfRange, "'(t)*99999999999' unrolls to more than"},
  };
  for (const auto& [text, code, message] : cases) {
    auto c = parse_megatron(text);
    ASSERT_FALSE(c) << text;
    EXPECT_EQ(c.error().code, code) << c.error().message;
    EXPECT_NE(c.error().message.find(message), std::string::npos) << c.error().message;
  }
}

TEST(ParseVllm, SizesAndExpertParallel) {
  auto c = parse_vllm("tp=8,dp=16");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->world(), 128);
  EXPECT_FALSE(c->expert_parallel);
  EXPECT_EQ(to_string(*c), "tp=8,dp=16,ep=off");
  for (const char* on : {"tp=8,dp=2,ep=1", "tp=8,dp=2,ep=on", "tp=8,dp=2,expert_parallel=true",
                         "tp=8,dp=2,ep=16", "tp=8,dp=2,pp=1,ep=true"}) {
    auto e = parse_vllm(on);
    ASSERT_TRUE(e) << on << ": " << e.error().message;
    EXPECT_TRUE(e->expert_parallel) << on;
    EXPECT_EQ(e->ep(), 16) << on;
  }
  auto off = parse_vllm("tp=2,ep=off");
  ASSERT_TRUE(off);
  EXPECT_FALSE(off->expert_parallel);
  EXPECT_EQ(parse_vllm("")->world(), 1);
}

TEST(ParseVllm, EnginesAreSeparateCopiesOfOneEngine) {
  // 4 engines of tp=8, dp=2: 64 ranks; EP spans one engine's tp*dp = 16 ranks.
  auto c = parse_vllm("tp=8,dp=2,engines=4,ep=16");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->world(), 64);
  EXPECT_EQ(c->engine_size(), 16);
  EXPECT_EQ(c->ep(), 16);
  EXPECT_EQ(to_string(*c), "tp=8,dp=2,ep=on,engines=4");
  EXPECT_FALSE(parse_vllm("tp=8,engines=4,ep=32"));  // EP is 8 here, not the 32 ranks of 4 engines
}

TEST(ParseVllm, Errors) {
  const std::tuple<const char*, ErrorCode, const char*> cases[] = {
      {"tp=8,etp=2", ErrorCode::kNotFound, "unknown key 'etp'"},
      {"tp=8,pp=2", ErrorCode::kUnsupported, "pp=2: only pp=1"},
      {"tp=8,dp=2,ep=4", ErrorCode::kInvalidArgument, "ep=4: vLLM's expert-parallel size is tp*dp = 16"},
      {"tp=8,ep=maybe", ErrorCode::kParse, "ep=maybe: not an integer"},
  };
  for (const auto& [text, code, message] : cases) {
    auto c = parse_vllm(text);
    ASSERT_FALSE(c) << text;
    EXPECT_EQ(c.error().code, code) << c.error().message;
    EXPECT_NE(c.error().message.find(message), std::string::npos) << c.error().message;
  }
}

}  // namespace
}  // namespace refit::models
