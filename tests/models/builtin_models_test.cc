#include <gtest/gtest.h>

#include "refit/models/builtin_models.h"

namespace refit::models {
namespace {

struct Published {
  const char* name;
  const char* architecture;
  std::int64_t exact;       // our count, derived by hand below
  double published;         // docs/models.md (billions)
  double projection_share;  // docs/models.md, share of bytes in gate/up/down (0 = not listed)
  std::int64_t fp32 = 0;    // elements kept in fp32: the router's e_score_correction_bias, E per MoE layer
};

// Exact counts (elements), BF16 bytes are twice these, but for the fp32 router biases of
// DeepSeek-V3 (256 per MoE layer: 58 layers, 59 with MTP) and Kimi-K2 (384 x 60), 4 bytes each:
// qwen3-235b-a22b: per layer attention q,o 2*8192*4096 + k,v 2*512*4096 = 71,303,168, q/k norm 256,
//   experts 128*3*1536*4096 = 2,415,919,104, router 128*4096 = 524,288, norms 2*4096
//   -> 2,487,755,008 x 94 = 233,848,970,752; embed + lm_head 2*151936*4096 = 1,244,659,712;
//   norm 4096 -> 235,093,634,560. Gate/up/down: 94*2,415,919,104 / total = 96.60 %.
// qwen3-30b-a3b: layer 8,388,608*2 + 1,048,576*2 + 256 + 128*3*768*2048 + 128*2048 + 4096
//   = 623,120,640 x 48 + 2*151936*2048 + 2048 = 30,532,122,624 (published "30.5B").
// qwen3-8b: layer 2*4096*4096 + 2*1024*4096 + 3*12288*4096 + 2*4096 + 256 = 192,946,432 x 36
//   + 2*151936*4096 + 4096 = 8,190,735,360 (published "8.2B": its model card, rounded).
// deepseek-v3: MLA per layer q_a 1536*7168 + 1536 + q_b 24576*1536 + kv_a 576*7168 + 512
//   + kv_b 32768*512 + o 7168*16384 = 187,107,328; norms 14,336; dense MLP 3*18432*7168
//   = 396,361,728; MoE 256*3*2048*7168 + shared 3*2048*7168 + router 256*7168 + bias 256
//   = 11,320,164,608. 3 dense layers 583,483,392 + 58 MoE layers 11,507,286,272
//   + 2*129280*7168 + 7168 = 671,026,419,200. Gate/up/down 657,652,187,136 = 98.0 %.
// deepseek-v3-mtp: + one MoE layer 11,507,286,272 + enorm, hnorm, shared_head.norm 3*7168
//   + eh_proj 7168*14336 = 11,610,068,224 (11.61 B; the embedding and head it shares with the
//   main model are not counted again: published "11.5B unique parameters").
// kimi-k2: MLA with 64 heads 101,124,096 per layer; dense layer 497,500,160; MoE 384 experts
//   17,059,365,248 per layer; 1 + 60 layers + 2*163840*7168 + 7168 = 1,026,408,232,448.
//   Gate/up/down 1,017,724,796,928 = 99.2 %.
// llama-3.1-405b: layer 2*16384^2 + 2*1024*16384 + 3*53248*16384 + 2*16384 = 3,187,703,808 x 126
//   + 2*128256*16384 + 16384 = 405,853,388,800. Gate/up/down 329,772,957,696 = 81.3 %.
// llama-3.1-8b: layer 2*4096^2 + 2*1024*4096 + 3*14336*4096 + 8192 = 218,112,000 x 32
//   + 2*128256*4096 + 4096 = 8,030,261,248.
constexpr Published kPublished[] = {
    {"qwen3-235b-a22b", "qwen3_moe", 235'093'634'560, 235.09, 0.966},
    {"qwen3-30b-a3b", "qwen3_moe", 30'532'122'624, 30.53, 0},
    {"qwen3-8b", "qwen3", 8'190'735'360, 8.19, 0},
    {"deepseek-v3", "deepseek_v3", 671'026'419'200, 671.03, 0.980, 58 * 256},
    {"deepseek-v3-mtp", "deepseek_v3", 682'636'487'424, 671.03 + 11.61, 0, 59 * 256},
    {"kimi-k2", "deepseek_v3", 1'026'408'232'448, 1026.4, 0.992, 60 * 384},
    {"llama-3.1-405b", "llama", 405'853'388'800, 405.85, 0.813},
    {"llama-3.1-8b", "llama", 8'030'261'248, 8.03, 0},
};

class BuiltinTotals : public ::testing::TestWithParam<Published> {};

TEST_P(BuiltinTotals, MatchPublishedCounts) {
  const auto& p = GetParam();
  auto model = builtin_model(p.name);
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->name, p.name);
  EXPECT_EQ(model->architecture, p.architecture);
  EXPECT_EQ(model->parameter_count(), p.exact);
  EXPECT_NEAR(static_cast<double>(model->parameter_count()) / 1e9, p.published, p.published * 1e-3);
  EXPECT_EQ(model->bytes().value, 2 * (p.exact - p.fp32) + 4 * p.fp32);  // BF16, router biases fp32
  if (p.projection_share > 0) {
    const double share =
        static_cast<double>(model->projection_bytes().value) / static_cast<double>(model->bytes().value);
    EXPECT_NEAR(share, p.projection_share, 0.0005);
  }
}

INSTANTIATE_TEST_SUITE_P(Catalog, BuiltinTotals, ::testing::ValuesIn(kPublished), [](const auto& info) {
  std::string name = info.param.name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
});

TEST(BuiltinModels, CatalogListsEveryModel) {
  EXPECT_EQ(builtin_models().size(), std::size(kPublished));
  for (const auto& m : builtin_models()) EXPECT_TRUE(builtin_model(m.name)) << m.name;
}

TEST(BuiltinModels, UnknownNameListsTheBuiltins) {
  auto model = builtin_model("gpt-5");
  ASSERT_FALSE(model);
  EXPECT_EQ(model.error().code, ErrorCode::kNotFound);
  EXPECT_NE(model.error().message.find("gpt-5"), std::string::npos);
  EXPECT_NE(model.error().message.find("qwen3-235b-a22b"), std::string::npos);
}

TEST(BuiltinModels, PerExpertKeepsTheTotal) {
  // Stacked [E, out, in] and per-expert [out, in] hold the same elements: 128 experts x 3
  // projections x 94 layers = 36,096 tensors instead of 3 x 94 = 282.
  auto stacked = builtin_model("qwen3-235b-a22b");
  auto split = builtin_model("qwen3-235b-a22b", HfOptions{.per_expert = true});
  ASSERT_TRUE(stacked && split);
  EXPECT_EQ(split->parameter_count(), stacked->parameter_count());
  EXPECT_EQ(split->tensors.size() - stacked->tensors.size(), 94u * 3 * (128 - 1));
}

}  // namespace
}  // namespace refit::models
