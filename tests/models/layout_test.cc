// Framework layout rules on small models, one rule per test, checked through the boxes ranks hold.
#include <algorithm>
#include <array>
#include <string>
#include <tuple>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/core/try.h"

#include "refit/models/builtin_models.h"
#include "refit/models/hf_config.h"
#include "refit/models/megatron_layout.h"
#include "refit/models/megatron_pipeline.h"
#include "refit/models/vllm_layout.h"

namespace refit::models {
namespace {

ModelSpec tiny(const std::string& file, HfOptions options = {}) {
  auto m = load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/" + file, options);
  EXPECT_TRUE(m) << m.error().message;
  return *m;
}

const WeightTensor& tensor(const ModelSpec& m, const std::string& name) {
  const auto it = std::ranges::find(m.tensors, name, [](const auto& t) { return t.spec.name; });
  EXPECT_NE(it, m.tensors.end()) << name;
  return *it;
}

std::vector<std::int32_t> ranks_of(const Layout& l) {
  std::vector<std::int32_t> out;
  for (const Rank r : l.mesh().ranks()) out.push_back(r.value);
  return out;
}

Box box(const Layout& l, std::int32_t rank) { return *l.local_box(Rank{rank}); }

Layout megatron(const ModelSpec& m, const std::string& config, const std::string& name) {
  auto layouts = MegatronLayouts::make(m, *parse_megatron(config));
  EXPECT_TRUE(layouts) << layouts.error().message;
  auto l = layouts->layout(tensor(m, name));
  EXPECT_TRUE(l) << l.error().message;
  return *l;
}

Layout vllm(const ModelSpec& m, const std::string& config, const std::string& name,
            std::int32_t first_rank = 0) {
  auto layouts = VllmLayouts::make(m, *parse_vllm(config), first_rank);
  EXPECT_TRUE(layouts) << layouts.error().message;
  auto l = layouts->layout(tensor(m, name));
  EXPECT_TRUE(l) << l.error().message;
  return *l;
}

// The first decoder layer of each chunk (stage when vp = 1), then the layer count.
Result<std::vector<std::int64_t>> starts(std::int64_t layers, const char* config) {
  const auto p = REFIT_TRY(megatron_pipeline(layers, 0, *parse_megatron(config)));
  std::vector<std::int64_t> out;
  for (const auto& c : p.chunks) out.push_back(c.first_layer);
  out.push_back(layers);
  return out;
}

TEST(StageStarts, EvenUnevenAndExplicitEnds) {
  EXPECT_EQ(*starts(8, "pp=4"), (std::vector<std::int64_t>{0, 2, 4, 6, 8}));
  // 61 over 16: ceil = 4 for stages 0..14 (60 layers), the last stage takes layer 60.
  auto ds = starts(61, "pp=16");
  ASSERT_TRUE(ds);
  EXPECT_EQ((*ds)[15], 60);
  EXPECT_EQ(ds->back(), 61);
  // 94 over 8: 7 stages of 12, the last 10. With Megatron's first/last counts: 11 + 6*12 + 11.
  EXPECT_EQ((*starts(94, "pp=8"))[7], 84);
  EXPECT_EQ(*starts(94, "pp=8,pp_first=11,pp_last=11"),
            (std::vector<std::int64_t>{0, 11, 23, 35, 47, 59, 71, 83, 94}));
  EXPECT_EQ(*starts(10, "pp=3,pp_last=2"), (std::vector<std::int64_t>{0, 4, 8, 10}));
  // 9 over 4: 3,3,3,0 leaves the last stage empty.
  auto empty = starts(9, "pp=4");
  ASSERT_FALSE(empty);
  EXPECT_EQ(empty.error().code, ErrorCode::kMismatch);
  EXPECT_NE(empty.error().message.find("stage 3 empty"), std::string::npos);
  // The other 7 layers do not split over 2 stages.
  EXPECT_EQ(testing::error_code(starts(10, "pp=3,pp_first=3")), ErrorCode::kMismatch);
}

// (stage, virtual stage, first layer, layers, MTP layers) of each chunk, in layer order.
std::vector<std::array<std::int64_t, 5>> chunks(std::int64_t layers, std::int64_t mtp, const char* config) {
  const auto p = megatron_pipeline(layers, mtp, *parse_megatron(config));
  EXPECT_TRUE(p) << p.error().message;
  std::vector<std::array<std::int64_t, 5>> out;
  for (const auto& c : p->chunks)
    out.push_back({c.stage, c.virtual_stage, c.first_layer, c.layers, c.mtp_layers});
  return out;
}

using Chunks = std::vector<std::array<std::int64_t, 5>>;

TEST(MegatronPipeline, VirtualStagesInterleaveChunksOverTheStages) {
  // 8 layers, pp=2, vp=2: 8/2 = 4 per stage, 2 per chunk; chunk c on stage c % 2
  // (get_num_layers_to_build: "Stage 0: [0, 1] [4, 5]; Stage 1: [2, 3] [6, 7]").
  EXPECT_EQ(chunks(8, 0, "pp=2,vp=2"),
            (Chunks{{0, 0, 0, 2, 0}, {1, 0, 2, 2, 0}, {0, 1, 4, 2, 0}, {1, 1, 6, 2, 0}}));
  // 8 layers, pp=2, vp=4: one layer per chunk, stage 0 holds 0, 2, 4, 6.
  EXPECT_EQ(chunks(8, 0, "pp=2,vp=4")[2], (std::array<std::int64_t, 5>{0, 1, 2, 1, 0}));
  // 12 layers, pp=3, vp=2, 2 on the first and last stage: 8 on the middle one, per chunk 1, 4, 1.
  // Chunk (stage 2, virtual 1) starts at 6 + 1 + 4 = 11 (get_transformer_layer_offset:
  // vp_stage * 6 + first/vp + middle rank * middle/vp).
  EXPECT_EQ(chunks(12, 0, "pp=3,vp=2,pp_first=2,pp_last=2"), (Chunks{{0, 0, 0, 1, 0},
                                                                     {1, 0, 1, 4, 0},
                                                                     {2, 0, 5, 1, 0},
                                                                     {0, 1, 6, 1, 0},
                                                                     {1, 1, 7, 4, 0},
                                                                     {2, 1, 11, 1, 0}}));
  // MTP layers on the last chunk, which also holds the final norm.
  const auto p = megatron_pipeline(8, 1, *parse_megatron("pp=2,vp=2"));
  ASSERT_TRUE(p);
  EXPECT_EQ(p->chunks.back().mtp_layers, 1);
  EXPECT_EQ(p->mtp_chunk, 3);
  EXPECT_EQ(p->norm_chunk, 3);
}

TEST(MegatronPipeline, LayoutStringsPlaceEachLayer) {
  // Et|tt|tt|tL over pp=2: chunk i on stage i % 2; layers counted in string order.
  EXPECT_EQ(chunks(6, 0, "pp=2,layout=Et|(tt|)*2tL"),
            (Chunks{{0, 0, 0, 1, 0}, {1, 0, 1, 2, 0}, {0, 1, 3, 2, 0}, {1, 1, 5, 1, 0}}));
  // E|t|t|L: the first and last chunks hold no decoder layer.
  EXPECT_EQ(chunks(2, 0, "pp=2,layout=E|t|t|L"),
            (Chunks{{0, 0, 0, 0, 0}, {1, 0, 0, 1, 0}, {0, 1, 1, 1, 0}, {1, 1, 2, 0, 0}}));
  // With MTP the final norm sits with the last decoder layer (has_final_layernorm_in_this_stage):
  // Et|t|t|mL puts layer 2 on chunk 2 (stage 0) and the MTP layer on chunk 3 (stage 1).
  const auto p = megatron_pipeline(3, 1, *parse_megatron("pp=2,layout=Et|t|t|mL"));
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->norm_chunk, 2);
  EXPECT_EQ(p->mtp_chunk, 3);
  EXPECT_EQ(p->embedding_chunk(0, false), 0);
  EXPECT_EQ(p->embedding_chunk(1, false), 3);  // the MTP chunk keeps a copy of the embedding
}

TEST(MegatronPipeline, RefusesLayoutsThatDoNotFitTheModel) {
  const std::tuple<std::int64_t, std::int64_t, const char*, const char*> cases[] = {
      {8, 0, "pp=2,layout=Et|tt|tt|tL", "layout=Et|tt|tt|tL: 6 decoder layers (t), the model has 8"},
      {2, 0, "layout=tEtL", "the first layer must be the embedding E, not 't'"},
      {2, 0, "layout=EttLE", "the last layer must be the loss L, not 'E'"},
      {2, 0, "pp=2,layout=Et|EtL", "the embedding E must appear exactly once"},
      {2, 1, "layout=EttL", "0 MTP layers (m), the model has 1"},
      {2, 1, "pp=2,layout=Et|m|t|L", "decoder layers (t) must come before MTP layers (m)"},
      {2, 1, "pp=2,layout=Et|tm|L|", "stage 'tm' (virtual stage 0 of stage 1) has MTP layers"},
  };
  for (const auto& [layers, mtp, config, message] : cases) {
    const auto p = megatron_pipeline(layers, mtp, *parse_megatron(config));
    ASSERT_FALSE(p) << config;
    EXPECT_EQ(p.error().code, ErrorCode::kMismatch) << p.error().message;
    EXPECT_NE(p.error().message.find(message), std::string::npos) << p.error().message;
  }
  // 10 layers, pp=2, vp=2: 5 per stage do not split over 2 chunks; 9 over pp=2 do not split at all.
  EXPECT_EQ(testing::error_code(megatron_pipeline(10, 0, *parse_megatron("pp=2,vp=2"))),
            ErrorCode::kMismatch);
  EXPECT_EQ(testing::error_code(megatron_pipeline(9, 0, *parse_megatron("pp=2,vp=2"))), ErrorCode::kMismatch);
  // MTP on stage 0's second chunk would give its ranks two copies of the embedding.
  EXPECT_EQ(testing::error_code(megatron_pipeline(2, 1, *parse_megatron("pp=2,layout=Et|t|mL|"))),
            ErrorCode::kUnsupported);
}

TEST(MegatronLayout, VirtualStagesPutEachLayerOnItsChunksStage) {
  // 8 layers, tp=2, pp=2, vp=2: layers 0-1 and 4-5 on stage 0 (ranks 0, 1), 2-3 and 6-7 on stage 1.
  const auto m = tiny("tiny-llama-8-layers.json");
  for (const int layer : {0, 1, 4, 5})
    EXPECT_EQ(ranks_of(megatron(m, "tp=2,pp=2,vp=2",
                                "model.layers." + std::to_string(layer) + ".mlp.up_proj.weight")),
              (std::vector<std::int32_t>{0, 1}));
  for (const int layer : {2, 3, 6, 7})
    EXPECT_EQ(ranks_of(megatron(m, "tp=2,pp=2,vp=2",
                                "model.layers." + std::to_string(layer) + ".mlp.up_proj.weight")),
              (std::vector<std::int32_t>{2, 3}));
  // Et|t|(ttt|)*2|L is Et|t|ttt|ttt||L over pp=2: layer 0 on stage 0, 1 on 1, 2-4 on 0, 5-7 on 1.
  EXPECT_EQ(
      ranks_of(megatron(m, "tp=2,pp=2,layout=Et|t|(ttt|)*2|L", "model.layers.4.input_layernorm.weight")),
      (std::vector<std::int32_t>{0, 1}));
}

TEST(MegatronLayout, DenseTensorsFollowTheRankOrder) {
  // tp=2, pp=2, dp=2: stage size 4; rank = tp + 2*dp + 4*pp. Layer 1 is on stage 1 (ranks 4..7).
  const auto m = tiny("tiny-llama.json");
  const auto q = megatron(m, "tp=2,pp=2,dp=2", "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(q.mesh().shape(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(ranks_of(q), (std::vector<std::int32_t>{4, 5, 6, 7}));
  EXPECT_EQ(box(q, 5), (Box{{32, 0}, {32, 64}}));  // column-parallel: rows 32..63 on tp rank 1
  EXPECT_EQ(box(q, 7), (Box{{32, 0}, {32, 64}}));  // replicated over dp
  const auto o = megatron(m, "tp=2,pp=2,dp=2", "model.layers.0.self_attn.o_proj.weight");
  EXPECT_EQ(box(o, 1), (Box{{0, 32}, {64, 32}}));  // row-parallel
  const auto norm = megatron(m, "tp=2,pp=2,dp=2", "model.layers.0.input_layernorm.weight");
  EXPECT_EQ(box(norm, 1), (Box{{0}, {64}}));
  // Embedding on the first stage, vocab-parallel; lm_head and final norm on the last.
  const auto embed = megatron(m, "tp=2,pp=2,dp=2", "model.embed_tokens.weight");
  EXPECT_EQ(ranks_of(embed), (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(box(embed, 1), (Box{{128, 0}, {128, 64}}));
  EXPECT_EQ(ranks_of(megatron(m, "tp=2,pp=2,dp=2", "lm_head.weight")),
            (std::vector<std::int32_t>{4, 5, 6, 7}));
}

TEST(MegatronLayout, TiedEmbeddingLivesOnTheFirstAndLastStage) {
  const auto m = tiny("tiny-qwen2.json");
  const auto embed = megatron(m, "tp=2,pp=2", "model.embed_tokens.weight");
  EXPECT_EQ(ranks_of(embed), (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(box(embed, 3), (Box{{128, 0}, {128, 64}}));
}

TEST(MegatronLayout, VocabPaddingFollowsVocabDivisibleBy) {
  // Qwen3's 151,936 rows over tp=2: vocab_divisible_by=1 pads to a multiple of 2 (none needed),
  // 75,968 a rank; off (Megatron-Bridge's unpadded vocab) splits it as it is, the same; 1000 (a
  // multiple of 2000) pads to 152,000, 76,000 a rank, rank 1's real rows 75,936.
  const auto qwen = builtin_model("qwen3-8b").value();
  EXPECT_EQ(box(megatron(qwen, "tp=2,vocab_divisible_by=1", "lm_head.weight"), 1),
            (Box{{75'968, 0}, {75'968, 4096}}));
  EXPECT_EQ(box(megatron(qwen, "tp=2,vocab_divisible_by=off", "lm_head.weight"), 1),
            (Box{{75'968, 0}, {75'968, 4096}}));
  EXPECT_EQ(box(megatron(qwen, "tp=2,vocab_divisible_by=1000", "lm_head.weight"), 1),
            (Box{{76'000, 0}, {75'936, 4096}}));
  // Unpadded, tp must divide the vocab: 1023 rows over tp=2 do not, and the error names the tensor.
  const auto tiny =
      load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-llama-vocab1023.json", {}).value();
  const auto bad = MegatronLayouts::make(tiny, parse_megatron("tp=2,vocab_divisible_by=off").value());
  ASSERT_FALSE(bad);
  EXPECT_EQ(bad.error().code, ErrorCode::kMismatch);
  EXPECT_NE(bad.error().message.find("model.embed_tokens.weight: tp=2 does not divide the vocab of 1023"),
            std::string::npos)
      << bad.error().message;
}

TEST(MegatronLayout, VocabSplitsInPartsOfThePaddedVocab) {
  // Qwen3's 151,936 rows over Megatron tp=2: padded to 152,064 (a multiple of 128*2), 76,032
  // rows per rank, so rank 1's real rows are [76,032, 151,936), 75,904 (torch.chunk: 75,968 each).
  // vLLM pads to a multiple of 64, which 151,936 is: 75,968 each. Llama's 128,256 over tp=8:
  // Megatron 16,128 rows per rank (padded 129,024), the last 15,360; vLLM 16,032 each.
  const auto qwen = builtin_model("qwen3-8b").value();
  const auto m = megatron(qwen, "tp=2", "lm_head.weight");
  EXPECT_EQ(box(m, 0), (Box{{0, 0}, {76'032, 4096}}));
  EXPECT_EQ(box(m, 1), (Box{{76'032, 0}, {75'904, 4096}}));
  EXPECT_EQ(box(vllm(qwen, "tp=2", "model.embed_tokens.weight"), 1), (Box{{75'968, 0}, {75'968, 4096}}));
  const auto llama = builtin_model("llama-3.1-8b").value();
  EXPECT_EQ(box(megatron(llama, "tp=8", "model.embed_tokens.weight"), 7),
            (Box{{112'896, 0}, {15'360, 4096}}));
  EXPECT_EQ(box(vllm(llama, "tp=8", "lm_head.weight"), 7), (Box{{112'224, 0}, {16'032, 4096}}));
}

TEST(MegatronLayout, ExpertTensorParallelDefaultsToTp) {
  // tp=2, ep=2 without etp: etp = tp = 2 (Megatron's default), so dp = lcm(2, 4)/2 = 2 and the
  // experts' intermediate dim (32) splits in 16 rows per etp rank; etp=1 keeps them whole.
  const auto m = tiny("tiny-qwen3-moe.json");
  EXPECT_EQ(box(megatron(m, "tp=2,ep=2", "model.layers.0.mlp.experts.gate_proj"), 1),
            (Box{{0, 16, 0}, {4, 16, 64}}));
  EXPECT_EQ(box(megatron(m, "tp=2,ep=2,etp=1", "model.layers.0.mlp.experts.gate_proj"), 1),
            (Box{{4, 0, 0}, {4, 32, 64}}));
}

TEST(MegatronLayout, ExpertsOverEpAndEtpReplicatedOverEdp) {
  // tp=2, ep=2, etp=2 -> dp = 2 (4 ranks per stage), edp = 4/(2*2) = 1.
  // Expert rank = etp + 2*ep: ep rank 1 holds experts 4..7, etp splits the intermediate dim.
  const auto m = tiny("tiny-qwen3-moe.json");
  const auto gate = megatron(m, "tp=2,ep=2,etp=2", "model.layers.0.mlp.experts.gate_proj");
  EXPECT_EQ(gate.mesh().shape(), (std::vector<std::int64_t>{1, 2, 2}));
  EXPECT_EQ(box(gate, 3), (Box{{4, 16, 0}, {4, 16, 64}}));
  const auto down = megatron(m, "tp=2,ep=2,etp=2", "model.layers.0.mlp.experts.down_proj");
  EXPECT_EQ(box(down, 2), (Box{{4, 0, 0}, {4, 64, 16}}));
  // ep=2 with tp=1: dp = 2, edp = 1. ep=1 with dp=2: every rank holds every expert.
  const auto whole = megatron(m, "dp=2", "model.layers.0.mlp.experts.up_proj");
  EXPECT_EQ(box(whole, 1), (Box{{0, 0, 0}, {8, 32, 64}}));
}

TEST(MegatronLayout, PerExpertTensorsLiveOnTheirEpRank) {
  // tp=1, ep=4, dp=8 -> edp = 2; expert 5 of 8 is on ep rank 5/(8/4) = 2:
  // ranks etp + ep*1 + 4*edp = 2 and 6.
  const auto m = tiny("tiny-qwen3-moe.json", HfOptions{.per_expert = true});
  const auto e5 = megatron(m, "ep=4,dp=8", "model.layers.1.mlp.experts.5.gate_proj.weight");
  EXPECT_EQ(ranks_of(e5), (std::vector<std::int32_t>{2, 6}));
  EXPECT_EQ(box(e5, 6), (Box{{0, 0}, {32, 64}}));
}

TEST(MegatronLayout, LatentAttentionProjections) {
  const auto m = tiny("tiny-deepseek-v3.json");
  const auto q_a = megatron(m, "tp=4", "model.layers.1.self_attn.q_a_proj.weight");
  EXPECT_EQ(box(q_a, 3), (Box{{0, 0}, {32, 64}}));  // replicated
  const auto q_b = megatron(m, "tp=4", "model.layers.1.self_attn.q_b_proj.weight");
  EXPECT_EQ(box(q_b, 3), (Box{{72, 0}, {24, 32}}));  // one head of 24 rows per rank
}

TEST(MegatronLayout, LocalSpecSplitsTheLatentDownProjectionsOverTp) {
  // get_gpt_layer_local_spec builds linear_q_down_proj and linear_kv_down_proj column-parallel:
  // over tp=2, q_a_proj [32, 64] rows 16..31 on rank 1, kv_a_proj_with_mqa [16 + 8, 64] rows 12..23.
  const auto m = tiny("tiny-deepseek-v3.json");
  EXPECT_EQ(box(megatron(m, "tp=2,spec=local", "model.layers.1.self_attn.q_a_proj.weight"), 1),
            (Box{{16, 0}, {16, 64}}));
  EXPECT_EQ(box(megatron(m, "tp=2,spec=local", "model.layers.1.self_attn.kv_a_proj_with_mqa.weight"), 1),
            (Box{{12, 0}, {12, 64}}));
  EXPECT_EQ(box(megatron(m, "tp=2,spec=local", "model.layers.1.self_attn.q_b_proj.weight"), 1),
            (Box{{48, 0}, {48, 32}}));  // as with the TE spec
}

TEST(MegatronLayout, SizesThatDoNotFit) {
  const std::tuple<const char*, const char*, const char*> cases[] = {
      {"tiny-llama.json", "tp=3", "tp=3 does not divide num_attention_heads=4"},
      {"tiny-llama.json", "ep=2", "has no routed experts"},
      {"tiny-qwen3-moe.json", "ep=16", "ep=16 does not divide the routed experts=8"},
      {"tiny-qwen3-moe.json", "etp=64,ep=1,dp=64", "etp=64 does not divide dim 1 (32)"},
      {"tiny-llama.json", "pp=3", "pp=3: 2 decoder layers leave stage 2 empty"},
  };
  for (const auto& [file, config, message] : cases) {
    auto layouts = MegatronLayouts::make(tiny(file), *parse_megatron(config));
    ASSERT_FALSE(layouts) << config;
    EXPECT_EQ(layouts.error().code, ErrorCode::kMismatch) << layouts.error().message;
    EXPECT_NE(layouts.error().message.find(message), std::string::npos) << layouts.error().message;
  }
  // 12 q heads in 3 query groups over tp=2: 2 does not divide 3, nor 3 2 (Megatron's
  // TransformerConfig refuses it even though tp divides the q heads).
  auto three = tiny("tiny-llama.json");
  three.num_heads = 12;
  three.num_kv_heads = 3;
  const auto odd = MegatronLayouts::make(three, *parse_megatron("tp=2"));
  ASSERT_FALSE(odd);
  EXPECT_NE(odd.error().message.find("--train tp=2 and 3 query groups"), std::string::npos)
      << odd.error().message;
  // 8 q heads of d = 2 rows in 1 query group over tp=8: linear_qkv has (8 + 2) * 2 = 20 rows,
  // which 8 ranks cannot split evenly (tp divides the 8 q heads, but not 2 * d = 4).
  const auto narrow = parse_hf_config(R"({"architectures": ["LlamaForCausalLM"], "model_type": "llama",
      "torch_dtype": "bfloat16", "hidden_size": 16, "head_dim": 2, "num_hidden_layers": 1,
      "num_attention_heads": 8, "num_key_value_heads": 1, "intermediate_size": 16, "vocab_size": 64})");
  ASSERT_TRUE(narrow) << narrow.error().message;
  const auto uneven = MegatronLayouts::make(*narrow, *parse_megatron("tp=8"));
  ASSERT_FALSE(uneven);
  EXPECT_EQ(uneven.error().code, ErrorCode::kMismatch);
  EXPECT_NE(
      uneven.error().message.find("model.layers.0.self_attn.k_proj.weight: --train tp=8 does not divide "
                                  "linear_qkv's 20 rows ((num_attention_heads 8 + 2 * 1 query groups) * "
                                  "head dim 2)"),
      std::string::npos)
      << uneven.error().message;
}

// tp=4 beyond tiny-llama's 2 query groups [q0 q1 k0 v0 | q2 q3 k1 v1]: each rank takes 2 heads of
// 16 rows, ranks 0 and 2 the q heads of groups 0 and 1 (q rows 0..31, 32..63), ranks 1 and 3
// their k and v heads (rows 0..15 and 16..31 of k and of v); the other ranks hold empty boxes.
TEST(MegatronLayout, TensorParallelBeyondTheQueryGroups) {
  const auto m = tiny("tiny-llama.json");
  const auto q = megatron(m, "tp=4", "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.mesh().shape(), (std::vector<std::int64_t>{1, 2, 2}));
  EXPECT_EQ(box(q, 0), (Box{{0, 0}, {32, 64}}));
  EXPECT_EQ(box(q, 2), (Box{{32, 0}, {32, 64}}));
  EXPECT_EQ(box(q, 1).extent[0], 0);
  const auto k = megatron(m, "tp=4", "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(box(k, 3), (Box{{16, 0}, {16, 64}}));
  EXPECT_EQ(box(k, 2).extent[0], 0);
  const auto v = megatron(m, "tp=4", "model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(box(v, 1), (Box{{0, 0}, {16, 64}}));
}

// tiny-llama-gqa8: 2 query groups of n = 4 q heads, d = 16, hidden 128; a group is
// [q 64 rows; k 16; v 16] = 96 rows. tp=4 (r = 2 ranks a group, s = 48 rows = 3 heads each):
// rank 2j+1 holds its group's q rows 48..63, then k and v; q is cut at 48 (S0:48), k at 48 - 64
// (S0:48@-64), v at 48 - 80 (S0:48@-80).
TEST(MegatronLayout, TensorParallelBeyondTheQueryGroupsMixesQWithKv) {
  const auto m = tiny("tiny-llama-gqa8.json");
  const auto q = megatron(m, "tp=4,dp=2", "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.mesh().shape(), (std::vector<std::int64_t>{2, 2, 2}));
  EXPECT_EQ(q.placements()[2], Placement::shard(0, 48));
  EXPECT_EQ(box(q, 0), (Box{{0, 0}, {48, 128}}));    // group 0, q rows [0, 48)
  EXPECT_EQ(box(q, 1), (Box{{48, 0}, {16, 128}}));   // [48, 96) clipped to q's 64
  EXPECT_EQ(box(q, 2), (Box{{64, 0}, {48, 128}}));   // group 1: q rows 64 + [0, 48)
  EXPECT_EQ(box(q, 7), (Box{{112, 0}, {16, 128}}));  // dp replica 1, group 1, rank 1
  const auto k = megatron(m, "tp=4,dp=2", "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(k.placements()[2], Placement::shard(0, 48, -64));
  EXPECT_EQ(box(k, 0).extent[0], 0);               // [-64, -16): nothing
  EXPECT_EQ(box(k, 1), (Box{{0, 0}, {16, 128}}));  // [-16, 32) clipped to [0, 16)
  EXPECT_EQ(box(k, 3), (Box{{16, 0}, {16, 128}}));
  const auto v = megatron(m, "tp=4,dp=2", "model.layers.0.self_attn.v_proj.weight");
  EXPECT_EQ(v.placements()[2], Placement::shard(0, 48, -80));
  EXPECT_EQ(box(v, 5), (Box{{0, 0}, {16, 128}}));  // [-32, 16) clipped to [0, 16)
}

// tp=8 (r = 4, s = 24 rows = 1.5 heads): group 0's fused rows [0,24) [24,48) [48,72) [72,96) on
// ranks 0..3. q rows 0..23, 24..47, 48..63, none; k rows (fused 64..79) 0..7 on rank 2, 8..15
// on rank 3; v (fused 80..95) all on rank 3. Group 1 the same on ranks 4..7, rows shifted by
// 64 (q) or 16 (k, v).
TEST(MegatronLayout, TensorParallelBeyondTheQueryGroupsCutsHeads) {
  const auto m = tiny("tiny-llama-gqa8.json");
  const auto q = megatron(m, "tp=8", "model.layers.1.self_attn.q_proj.weight");
  EXPECT_EQ(box(q, 1), (Box{{24, 0}, {24, 128}}));
  EXPECT_EQ(box(q, 2), (Box{{48, 0}, {16, 128}}));
  EXPECT_EQ(box(q, 3).extent[0], 0);
  EXPECT_EQ(box(q, 5), (Box{{88, 0}, {24, 128}}));
  const auto k = megatron(m, "tp=8", "model.layers.1.self_attn.k_proj.weight");
  EXPECT_EQ(box(k, 2), (Box{{0, 0}, {8, 128}}));
  EXPECT_EQ(box(k, 3), (Box{{8, 0}, {8, 128}}));
  EXPECT_EQ(box(k, 7), (Box{{24, 0}, {8, 128}}));
  const auto v = megatron(m, "tp=8", "model.layers.1.self_attn.v_proj.weight");
  EXPECT_EQ(box(v, 2).extent[0], 0);
  EXPECT_EQ(box(v, 3), (Box{{0, 0}, {16, 128}}));
  EXPECT_EQ(box(v, 7), (Box{{16, 0}, {16, 128}}));
}

TEST(VllmLayout, FewerKvHeadsThanTpAreReplicated) {
  // 2 kv heads over tp=4: TP axis viewed as [2, 2]; ranks 0,1 hold head 0, ranks 2,3 head 1.
  // Inference ranks start at 10; dp=2 replicas.
  const auto m = tiny("tiny-llama.json");
  const auto k = vllm(m, "tp=4,dp=2", "model.layers.0.self_attn.k_proj.weight", 10);
  EXPECT_EQ(k.mesh().shape(), (std::vector<std::int64_t>{2, 2, 2}));
  EXPECT_EQ(box(k, 11), (Box{{0, 0}, {16, 64}}));
  EXPECT_EQ(box(k, 12), (Box{{16, 0}, {16, 64}}));
  EXPECT_EQ(box(k, 17), (Box{{16, 0}, {16, 64}}));
  const auto q = vllm(m, "tp=4,dp=2", "model.layers.0.self_attn.q_proj.weight", 10);
  EXPECT_EQ(box(q, 17), (Box{{48, 0}, {16, 64}}));
  // kv heads >= tp: a plain column split.
  const auto k2 = vllm(m, "tp=2", "model.layers.0.self_attn.k_proj.weight");
  EXPECT_EQ(box(k2, 1), (Box{{16, 0}, {16, 64}}));
}

TEST(VllmLayout, ExpertsWithoutEpShardTheIntermediateDim) {
  // gate/up [E, I, H] Shard(1), down [E, H, I] Shard(2) over TP; separate engines hold copies.
  const auto m = tiny("tiny-qwen3-moe.json");
  const auto up = vllm(m, "tp=2,engines=2", "model.layers.0.mlp.experts.up_proj");
  EXPECT_EQ(up.mesh().shape(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(box(up, 3), (Box{{0, 16, 0}, {8, 16, 64}}));
  const auto down = vllm(m, "tp=2,engines=2", "model.layers.0.mlp.experts.down_proj");
  EXPECT_EQ(box(down, 1), (Box{{0, 0, 16}, {8, 64, 16}}));
}

TEST(VllmLayout, InternalDataParallelFlattensTheMoeTensorParallelGroup) {
  // One engine, tp=2, dp=2, no EP: the MoE TP is tp*dp = 4, MoE rank tp_rank + 2*dp_rank, so
  // I = 32 splits in 4 rows of 8 over ranks 0..3; two engines repeat it on ranks 4..7. Dense
  // weights stay TP over each DP rank.
  const auto m = tiny("tiny-qwen3-moe.json");
  const auto up = vllm(m, "tp=2,dp=2,engines=2", "model.layers.0.mlp.experts.up_proj");
  EXPECT_EQ(up.mesh().shape(), (std::vector<std::int64_t>{2, 4}));
  EXPECT_EQ(box(up, 2), (Box{{0, 16, 0}, {8, 8, 64}}));
  EXPECT_EQ(box(up, 6), (Box{{0, 16, 0}, {8, 8, 64}}));
  const auto down = vllm(m, "tp=2,dp=2", "model.layers.0.mlp.experts.down_proj");
  EXPECT_EQ(box(down, 3), (Box{{0, 0, 24}, {8, 64, 8}}));
  const auto q = vllm(m, "tp=2,dp=2,engines=2", "model.layers.0.self_attn.q_proj.weight");
  EXPECT_EQ(q.mesh().shape(), (std::vector<std::int64_t>{4, 2}));
  EXPECT_EQ(box(q, 7), box(q, 1));
}

TEST(VllmLayout, ExpertParallelSplitsExpertsOverAllRanks) {
  // EP = tp*dp = 4: expert e on rank e/2, whole (one engine: a [1, 4] mesh); dense weights still
  // TP over each DP rank.
  const auto m = tiny("tiny-qwen3-moe.json");
  const auto gate = vllm(m, "tp=2,dp=2,ep=on", "model.layers.0.mlp.experts.gate_proj", 8);
  EXPECT_EQ(gate.mesh().shape(), (std::vector<std::int64_t>{1, 4}));
  EXPECT_EQ(box(gate, 10), (Box{{4, 0, 0}, {2, 32, 64}}));
  const auto per = tiny("tiny-qwen3-moe.json", HfOptions{.per_expert = true});
  const auto e5 = vllm(per, "tp=2,dp=2,ep=on", "model.layers.0.mlp.experts.5.down_proj.weight", 8);
  EXPECT_EQ(ranks_of(e5), (std::vector<std::int32_t>{10}));
  const auto router = vllm(m, "tp=2,dp=2,ep=on", "model.layers.0.mlp.gate.weight", 8);
  EXPECT_EQ(router.mesh().size(), 4);
  EXPECT_EQ(box(router, 11), (Box{{0, 0}, {8, 64}}));
  // Sequence-parallel MoE (EP, tp > 1, dp > 1): DeepSeek's shared experts are whole on every
  // rank; with dp = 1 they are TP-sharded like a dense MLP.
  const auto ds = tiny("tiny-deepseek-v3.json");
  const auto shared = vllm(ds, "tp=2,dp=2,ep=on", "model.layers.1.mlp.shared_experts.gate_proj.weight");
  EXPECT_EQ(box(shared, 3), (Box{{0, 0}, {32, 64}}));
  EXPECT_EQ(box(vllm(ds, "tp=2,ep=on", "model.layers.1.mlp.shared_experts.gate_proj.weight"), 1),
            (Box{{16, 0}, {16, 64}}));
  // Two engines: each splits the experts over its own 4 ranks (8..11 and 12..15).
  const auto two = vllm(per, "tp=2,dp=2,ep=on,engines=2", "model.layers.0.mlp.experts.5.down_proj.weight", 8);
  EXPECT_EQ(ranks_of(two), (std::vector<std::int32_t>{10, 14}));
}

TEST(VllmLayout, SharedExpertsAreWholeOnlyOnSequenceParallelMoeBackends) {
  // tp=2, dp=2, EP: rank 3 (tp rank 1) holds shared gate_proj [32, 64] whole when the backend
  // runs MoE sequence-parallel (vLLM's use_sequence_parallel_moe list), else rows 16..31 of it.
  const auto ds = tiny("tiny-deepseek-v3.json");
  const Box whole{{0, 0}, {32, 64}};
  const Box sharded{{16, 0}, {16, 64}};
  for (const auto* backend : {"allgather_reducescatter", "naive", "pplx", "deepep_high_throughput",
                              "deepep_low_latency", "deepep_v2", "mori", "mori_high_throughput",
                              "mori_low_latency", "nixl_ep", "flashinfer_nvlink_one_sided", "passthrough"})
    EXPECT_EQ(box(vllm(ds, fmt::format("tp=2,dp=2,ep=on,all2all={}", backend),
                       "model.layers.1.mlp.shared_experts.gate_proj.weight"),
                  3),
              whole)
        << backend;
  for (const auto* backend : {"moonep", "flashinfer_all2allv", "flashinfer_nvlink_two_sided"})
    EXPECT_EQ(box(vllm(ds, fmt::format("tp=2,dp=2,ep=on,all2all={}", backend),
                       "model.layers.1.mlp.shared_experts.gate_proj.weight"),
                  3),
              sharded)
        << backend;
  EXPECT_EQ(all2all_backends().size(), 15u);  // every backend is in one list above
}

TEST(VllmLayout, MtpProjectionIsReplicatedButColumnParallelInMegatron) {
  const auto m = tiny("tiny-deepseek-v3.json", HfOptions{.include_mtp = true});
  const auto inference = vllm(m, "tp=2", "model.layers.3.eh_proj.weight");
  EXPECT_EQ(box(inference, 1), (Box{{0, 0}, {64, 128}}));
  // Megatron pp=2: 3 layers -> stages of 2 and 1; the MTP layer joins the last stage.
  const auto training = megatron(m, "tp=2,pp=2", "model.layers.3.eh_proj.weight");
  EXPECT_EQ(ranks_of(training), (std::vector<std::int32_t>{2, 3}));
  EXPECT_EQ(box(training, 3), (Box{{32, 0}, {32, 128}}));
}

TEST(MegatronLayout, MtpSharesTheEmbeddingWhichTheLastStageKeepsACopyOf) {
  // The MTP layer reads the main embedding and lm_head: no tensors of its own, and with pp=2
  // the last stage (ranks 2, 3) holds the embedding too, vocab-split like the first.
  const auto m = tiny("tiny-deepseek-v3.json", HfOptions{.include_mtp = true});
  for (const auto& t : m.tensors) {
    EXPECT_FALSE(t.spec.name.ends_with("embed_tokens.weight") && t.spec.name != "model.embed_tokens.weight");
    EXPECT_FALSE(t.spec.name.ends_with("shared_head.head.weight")) << t.spec.name;
  }
  const auto embed = megatron(m, "tp=2,pp=2", "model.embed_tokens.weight");
  EXPECT_EQ(ranks_of(embed), (std::vector<std::int32_t>{0, 1, 2, 3}));
  EXPECT_EQ(box(embed, 3), box(embed, 1));
  // Without MTP only the first stage holds it.
  EXPECT_EQ(ranks_of(megatron(tiny("tiny-deepseek-v3.json"), "tp=2,pp=2", "model.embed_tokens.weight")),
            (std::vector<std::int32_t>{0, 1}));
}

TEST(VllmLayout, SizesThatDoNotFit) {
  const std::tuple<const char*, const char*, const char*> cases[] = {
      {"tiny-llama.json", "tp=3", "tp=3 does not divide num_attention_heads=4"},
      {"tiny-qwen3-moe.json", "tp=2,dp=8,ep=on", "tp*dp = 16 does not divide the 8 routed"},
      {"tiny-qwen3-moe.json", "tp=4,dp=1", ""},  // fits: 2 kv heads, each on 2 ranks
  };
  for (const auto& [file, config, message] : cases) {
    auto layouts = VllmLayouts::make(tiny(file), *parse_vllm(config), 0);
    if (std::string(message).empty()) {
      EXPECT_TRUE(layouts) << layouts.error().message;
      continue;
    }
    ASSERT_FALSE(layouts) << config;
    EXPECT_EQ(layouts.error().code, ErrorCode::kMismatch) << layouts.error().message;
    EXPECT_NE(layouts.error().message.find(message), std::string::npos) << layouts.error().message;
  }
  // 3 kv heads and tp=2: neither divides the other.
  auto m = tiny("tiny-llama.json");
  m.num_kv_heads = 3;
  auto odd = VllmLayouts::make(m, *parse_vllm("tp=2"), 0);
  ASSERT_FALSE(odd);
  EXPECT_EQ(odd.error().code, ErrorCode::kMismatch);
  EXPECT_NE(odd.error().message.find("num_key_value_heads=3"), std::string::npos);
}

}  // namespace
}  // namespace refit::models
