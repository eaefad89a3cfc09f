// Storage maps against hand-computed offsets (tiny-llama: hidden 64, 4 q heads / 2 kv heads of
// 16, intermediate 128; tiny-qwen3-moe: 8 experts of intermediate 32), and refusals. The
// byte-for-byte check against the frameworks' own construction is tests/python/test_storage.py.
#include "refit/models/storage_map.h"

#include <algorithm>
#include <string>

#include <tuple>
#include <vector>

#include <gtest/gtest.h>

#include "refit/models/hf_config.h"
#include "refit/models/manifest.h"
#include "refit/models/problem_builder.h"
#include "refit/models/storage_check.h"
#include "storage_lookup.h"

namespace refit::models {
namespace {

ModelSpec tiny(const char* file, const HfOptions& options = {}) {
  return load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/" + file, options).value();
}

struct Maps {
  ReshardProblem problem;
  StorageMap megatron;
  StorageMap vllm;
};

Maps maps(const ModelSpec& m, const char* train, const char* infer) {
  const auto t = parse_megatron(train).value();
  const auto i = parse_vllm(infer).value();
  auto problem = build_problem(m, t, i).value();
  auto megatron = megatron_storage(m, t, problem);
  auto vllm = vllm_storage(m, i, problem);
  EXPECT_TRUE(megatron) << megatron.error().message;
  EXPECT_TRUE(vllm) << vllm.error().message;
  return Maps{.problem = std::move(problem), .megatron = *megatron, .vllm = *vllm};
}

using testing::index_of;
using testing::parameter;

// (first logical row, rows, first parameter element) of each region of `tensor` on the rank.
std::vector<std::array<std::int64_t, 3>> rows_of(const ReshardProblem& p, const RankStorage& r,
                                                 const std::string& tensor) {
  std::vector<std::array<std::int64_t, 3>> out;
  for (const auto& g : r.regions)
    if (g.tensor == index_of(p, tensor)) out.push_back({g.box.offset[0], g.box.extent[0], g.offset});
  return out;
}

using Rows = std::vector<std::array<std::int64_t, 3>>;

// Megatron tp=1: linear_qkv is [g0: q 0..31, k 0..15, v 0..15; g1: q 32..63, k 16..31, v 16..31]
// of 64-element rows: q rows 0..31 at row 0, q rows 32..63 at row 64; k at rows 32 and 96; v at
// 48 and 112 (element offsets are rows * 64).
TEST(StorageMap, MegatronInterleavesQkvPerQueryGroup) {
  const auto m = maps(tiny("tiny-llama.json"), "tp=1", "tp=1");
  const auto& r = m.megatron.of(Rank{0});
  EXPECT_EQ(parameter(r, "decoder.layers.1.self_attention.linear_qkv.weight").shape, (Shape{128, 64}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.1.self_attn.q_proj.weight"),
            (Rows{{0, 32, 0}, {32, 32, 64 * 64}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.1.self_attn.k_proj.weight"),
            (Rows{{0, 16, 32 * 64}, {16, 16, 96 * 64}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.1.self_attn.v_proj.weight"),
            (Rows{{0, 16, 48 * 64}, {16, 16, 112 * 64}}));
}

// Megatron tp=2: rank 1 holds group 1 alone, [q 32..63; k 16..31; v 16..31] = 64 rows; its
// linear_fc1 is [gate rows 64..127; up rows 64..127] (gate at row 0, up at row 64).
TEST(StorageMap, MegatronTensorParallelRanksHoldWholeGroupsAndGateThenUp) {
  const auto m = maps(tiny("tiny-llama.json"), "tp=2", "tp=1");
  const auto& r = m.megatron.of(Rank{1});
  EXPECT_EQ(parameter(r, "decoder.layers.0.self_attention.linear_qkv.weight").shape, (Shape{64, 64}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.q_proj.weight"), (Rows{{32, 32, 0}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.k_proj.weight"), (Rows{{16, 16, 32 * 64}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.v_proj.weight"), (Rows{{16, 16, 48 * 64}}));
  EXPECT_EQ(parameter(r, "decoder.layers.0.mlp.linear_fc1.weight").shape, (Shape{128, 64}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.mlp.gate_proj.weight"), (Rows{{64, 64, 0}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.mlp.up_proj.weight"), (Rows{{64, 64, 64 * 64}}));
}

// Megatron tp=4 beyond the 2 query groups: each rank holds 32 rows of linear_qkv, rank 2 group
// 1's q heads (q rows 32..63 at row 0), rank 3 its k and v (k rows 16..31 at row 0, v at 16).
// (Vocab 1023, which Megatron pads to 1024 = 4 partitions of 256 as torch.chunk splits it.)
TEST(StorageMap, MegatronBeyondTheQueryGroupsHoldsPartOfAGroup) {
  const auto m = maps(tiny("tiny-llama-vocab1023.json"), "tp=4", "tp=1");
  EXPECT_EQ(parameter(m.megatron.of(Rank{2}), "decoder.layers.0.self_attention.linear_qkv.weight").shape,
            (Shape{32, 64}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{2}), "model.layers.0.self_attn.q_proj.weight"),
            (Rows{{32, 32, 0}}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{3}), "model.layers.0.self_attn.k_proj.weight"),
            (Rows{{16, 16, 0}}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{3}), "model.layers.0.self_attn.v_proj.weight"),
            (Rows{{16, 16, 16 * 64}}));
}

// tiny-llama-gqa8 (2 groups of [4 q heads; k; v] of 16 rows, hidden 128) over Megatron tp=4: each
// rank holds 48 rows of its group; rank 1 q rows 48..63 at row 0, then k rows 0..15 at row 16 and
// v rows 0..15 at row 32, so q and k/v heads share its linear_qkv.
TEST(StorageMap, MegatronBeyondTheQueryGroupsMixesQWithKvOnARank) {
  const auto m = maps(tiny("tiny-llama-gqa8.json"), "tp=4", "tp=2");
  const auto& r = m.megatron.of(Rank{1});
  EXPECT_EQ(parameter(r, "decoder.layers.0.self_attention.linear_qkv.weight").shape, (Shape{48, 128}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.q_proj.weight"), (Rows{{48, 16, 0}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.k_proj.weight"), (Rows{{0, 16, 16 * 128}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.v_proj.weight"), (Rows{{0, 16, 32 * 128}}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{2}), "model.layers.0.self_attn.q_proj.weight"),
            (Rows{{64, 48, 0}}));
}

// The same over tp=8: 24 rows (1.5 heads) a rank. Rank 2 holds group 0's fused rows 48..71: q rows
// 48..63 at row 0 and the first half of k (rows 0..7) at row 16; rank 3 fused rows 72..95: k rows
// 8..15 at row 0 and v rows 0..15 at row 8. Rank 6 is rank 2's place in group 1 (q + 64, k + 16).
TEST(StorageMap, MegatronBeyondTheQueryGroupsCutsAHeadBetweenRanks) {
  const auto m = maps(tiny("tiny-llama-gqa8.json"), "tp=8", "tp=4");
  const auto& r2 = m.megatron.of(Rank{2});
  const auto& r3 = m.megatron.of(Rank{3});
  EXPECT_EQ(parameter(r2, "decoder.layers.1.self_attention.linear_qkv.weight").shape, (Shape{24, 128}));
  EXPECT_EQ(rows_of(m.problem, r2, "model.layers.1.self_attn.q_proj.weight"), (Rows{{48, 16, 0}}));
  EXPECT_EQ(rows_of(m.problem, r2, "model.layers.1.self_attn.k_proj.weight"), (Rows{{0, 8, 16 * 128}}));
  EXPECT_EQ(rows_of(m.problem, r2, "model.layers.1.self_attn.v_proj.weight"), (Rows{}));
  EXPECT_EQ(rows_of(m.problem, r3, "model.layers.1.self_attn.q_proj.weight"), (Rows{}));
  EXPECT_EQ(rows_of(m.problem, r3, "model.layers.1.self_attn.k_proj.weight"), (Rows{{8, 8, 0}}));
  EXPECT_EQ(rows_of(m.problem, r3, "model.layers.1.self_attn.v_proj.weight"), (Rows{{0, 16, 8 * 128}}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{6}), "model.layers.1.self_attn.k_proj.weight"),
            (Rows{{16, 8, 16 * 128}}));
}

// vLLM tp=4 with 2 kv heads: rank 3 holds q head 3 (rows 48..63) and kv head 1 (rows 16..31,
// replicated on ranks 2 and 3): qkv_proj [q 16 rows; k 16; v 16].
TEST(StorageMap, VllmConcatenatesTheRanksQkvWithReplicatedKvHeads) {
  const auto m = maps(tiny("tiny-llama.json"), "tp=1", "tp=4");
  const auto& r = m.vllm.of(Rank{4});  // inference rank 3 (one training rank first)
  EXPECT_EQ(parameter(r, "model.layers.0.self_attn.qkv_proj.weight").shape, (Shape{48, 64}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.q_proj.weight"), (Rows{{48, 16, 0}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.k_proj.weight"), (Rows{{16, 16, 16 * 64}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.self_attn.v_proj.weight"), (Rows{{16, 16, 32 * 64}}));
}

// vLLM w13 on tp=2: [8 experts, 2*16 rows, 64]: gate rows 16..31 of every expert at row 0 of its
// expert (strides 32*64, 64, 1), up at row 16 (offset 16*64). Megatron TEGroupedMLP with ep=2,
// etp=1: rank 1 holds experts 4..7 as weight0..weight3 [64, 64] each.
TEST(StorageMap, StackedExpertsAsFusedMoeAndGroupedMlp) {
  const auto m = maps(tiny("tiny-qwen3-moe.json"), "tp=1,ep=2,dp=2", "tp=2");
  const auto& v = m.vllm.of(Rank{m.problem.source_ranks() + 1});
  EXPECT_EQ(parameter(v, "model.layers.0.mlp.experts.w13_weight").shape, (Shape{8, 32, 64}));
  EXPECT_EQ(parameter(v, "model.layers.0.mlp.experts.w2_weight").shape, (Shape{8, 64, 16}));
  for (const auto& g : v.regions)
    if (g.tensor == index_of(m.problem, "model.layers.0.mlp.experts.up_proj")) {
      EXPECT_EQ(g.offset, 16 * 64);
      EXPECT_EQ(g.strides, (Shape{32 * 64, 64, 1}));
      EXPECT_EQ(g.box.offset, (Shape{0, 16, 0}));
    }
  const auto& t = m.megatron.of(Rank{1});
  EXPECT_EQ(parameter(t, "decoder.layers.1.mlp.experts.linear_fc1.weight3").shape, (Shape{64, 64}));
  EXPECT_EQ(parameter(t, "decoder.layers.1.mlp.experts.linear_fc2.weight0").shape, (Shape{64, 32}));
  EXPECT_EQ(rows_of(m.problem, t, "model.layers.1.mlp.experts.up_proj"),
            (Rows{{4, 1, 32 * 64}, {5, 1, 32 * 64}, {6, 1, 32 * 64}, {7, 1, 32 * 64}}));
}

// Per-expert tensors, vLLM EP over 2 ranks round_robin: inference rank 1 holds experts 1, 3, 5,
// 7 at slots 0..3, so expert 5's up_proj [32, 64] sits at w13 rows 2*2*32 + 32 = 160 of
// [4, 64, 64]. Megatron ep=2: expert 6 is local expert 2 of rank 1, its up rows at row 32 of
// linear_fc1.weight2 [64, 64].
TEST(StorageMap, PerExpertTensorsAtTheirSlotsLinearAndRoundRobin) {
  const auto m = maps(tiny("tiny-qwen3-moe.json", HfOptions{.per_expert = true}), "tp=1,ep=2,dp=2",
                      "tp=1,dp=2,ep=on,placement=round_robin");
  const auto& v = m.vllm.of(Rank{m.problem.source_ranks() + 1});
  EXPECT_EQ(parameter(v, "model.layers.0.mlp.experts.w13_weight").shape, (Shape{4, 64, 64}));
  EXPECT_EQ(rows_of(m.problem, v, "model.layers.0.mlp.experts.5.up_proj.weight"), (Rows{{0, 32, 160 * 64}}));
  EXPECT_TRUE(rows_of(m.problem, v, "model.layers.0.mlp.experts.4.up_proj.weight").empty());
  const auto& t = m.megatron.of(Rank{1});
  EXPECT_EQ(parameter(t, "decoder.layers.0.mlp.experts.linear_fc1.weight2").shape, (Shape{64, 64}));
  EXPECT_EQ(rows_of(m.problem, t, "model.layers.0.mlp.experts.6.up_proj.weight"), (Rows{{0, 32, 32 * 64}}));
}

// round_robin cannot be a layout of stacked [E, ...] experts: refused, pointing at --per-expert.
TEST(StorageMap, RoundRobinNeedsPerExpertTensors) {
  const auto refused = build_problem(tiny("tiny-qwen3-moe.json"), parse_megatron("tp=1").value(),
                                     parse_vllm("tp=2,ep=on,placement=round_robin").value());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("--per-expert"), std::string::npos) << refused.error().message;
  EXPECT_FALSE(parse_vllm("tp=2,placement=round_robin"));  // without EP there is nothing to place
}

// tiny-deepseek-v3 (MLA, q LoRA 32, kv LoRA 16 + rope 8): vLLM's replicated fused_qkv_a_proj
// [32 + 24, 64] holds q_a_proj at row 0 and kv_a_proj_with_mqa at row 32; Megatron keeps them as
// linear_q_down_proj / linear_kv_down_proj and the router bias as an fp32 expert_bias.
TEST(StorageMap, LatentAttentionAndTheFp32RouterBias) {
  const auto m = maps(tiny("tiny-deepseek-v3.json"), "tp=2,ep=2,etp=1", "tp=2");
  const auto& v = m.vllm.of(Rank{m.problem.source_ranks()});
  EXPECT_EQ(parameter(v, "model.layers.1.self_attn.fused_qkv_a_proj.weight").shape, (Shape{56, 64}));
  EXPECT_EQ(rows_of(m.problem, v, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight"),
            (Rows{{0, 24, 32 * 64}}));
  const auto& t = m.megatron.of(Rank{0});
  EXPECT_EQ(parameter(t, "decoder.layers.1.self_attention.linear_kv_down_proj.weight").shape,
            (Shape{24, 64}));
  EXPECT_EQ(parameter(t, "decoder.layers.1.mlp.router.expert_bias").dtype, DType::kFP32);
  EXPECT_EQ(parameter(t, "decoder.layers.0.input_layernorm.weight").shape, (Shape{64}));
}

// Megatron's moe_mlp_glu_interleave_size = 8 (glu_interleave=8), tiny-qwen3-moe experts of
// intermediate 32 over ep=2, etp=1: expert 0's linear_fc1.weight0 [64, 64] on rank 0 holds
// [g 0..7; u 0..7; g 8..15; u 8..15; ...], so gate block b lies at row 16b and up block b at
// 16b + 8 (element offsets rows * 64); fc2 is unchanged. Without it: gate at 0, up at 32.
TEST(StorageMap, GluInterleavedExpertsTakeTurnsInBlocks) {
  const auto per_expert = tiny("tiny-qwen3-moe.json", HfOptions{.per_expert = true});
  const auto m = maps(per_expert, "ep=2,etp=1,glu_interleave=8", "tp=1");
  const auto& r = m.megatron.of(Rank{0});
  EXPECT_EQ(parameter(r, "decoder.layers.0.mlp.experts.linear_fc1.weight0").shape, (Shape{64, 64}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.mlp.experts.0.gate_proj.weight"),
            (Rows{{0, 8, 0}, {8, 8, 16 * 64}, {16, 8, 32 * 64}, {24, 8, 48 * 64}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.mlp.experts.0.up_proj.weight"),
            (Rows{{0, 8, 8 * 64}, {8, 8, 24 * 64}, {16, 8, 40 * 64}, {24, 8, 56 * 64}}));
  EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.mlp.experts.0.down_proj.weight"), (Rows{{0, 64, 0}}));
  // Stacked experts: the same blocks, each expert's in its own parameter.
  const auto stacked = maps(tiny("tiny-qwen3-moe.json"), "ep=2,etp=1,glu_interleave=8", "tp=1");
  std::int64_t up_regions = 0;
  for (const auto& g : stacked.megatron.of(Rank{1}).regions)
    if (g.tensor == index_of(stacked.problem, "model.layers.1.mlp.experts.up_proj")) {
      EXPECT_EQ(g.offset % (16 * 64), 8 * 64);
      ++up_regions;
    }
  EXPECT_EQ(up_regions, 4 * 4);  // 4 local experts of 4 blocks
  // Megatron reshapes each rank's fc1 output in blocks of 2*8: 32/etp rows must be whole blocks,
  // refused with the problem, whether or not storage is asked for.
  const auto t = parse_megatron("ep=2,etp=1,glu_interleave=12").value();
  const auto refused = build_problem(per_expert, t, parse_vllm("tp=1").value());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("glu_interleave=12 does not divide the 32 gate rows"),
            std::string::npos)
      << refused.error().message;
}

// tiny-llama-bias (attention_bias, mlp_bias; intermediate 128) over tp=2 on both sides, rank 1:
// the gate/up biases [gate rows 64..127; up rows 64..127] in one parameter of 128 (Megatron
// linear_fc1.bias, vLLM gate_up_proj.bias: gate at 0, up at 64); the row-parallel o_proj and
// down_proj biases [64] whole on every rank.
TEST(StorageMap, LlamaBiasesLieAsTheirWeights) {
  const auto m = maps(tiny("tiny-llama-bias.json"), "tp=2", "tp=2");
  const auto& t = m.megatron.of(Rank{1});
  const auto& v = m.vllm.of(Rank{3});
  for (const auto* fc1 : {"decoder.layers.0.mlp.linear_fc1.bias", "model.layers.0.mlp.gate_up_proj.bias"}) {
    const auto& r = std::string(fc1).starts_with("decoder") ? t : v;
    EXPECT_EQ(parameter(r, fc1).shape, (Shape{128}));
    EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.mlp.gate_proj.bias"), (Rows{{64, 64, 0}})) << fc1;
    EXPECT_EQ(rows_of(m.problem, r, "model.layers.0.mlp.up_proj.bias"), (Rows{{64, 64, 64}})) << fc1;
  }
  EXPECT_EQ(parameter(t, "decoder.layers.0.self_attention.linear_proj.bias").shape, (Shape{64}));
  EXPECT_EQ(parameter(t, "decoder.layers.0.mlp.linear_fc2.bias").shape, (Shape{64}));
  EXPECT_EQ(rows_of(m.problem, t, "model.layers.0.mlp.down_proj.bias"), (Rows{{0, 64, 0}}));
  EXPECT_EQ(parameter(v, "model.layers.0.self_attn.o_proj.bias").shape, (Shape{64}));
  EXPECT_EQ(parameter(v, "model.layers.0.mlp.down_proj.bias").shape, (Shape{64}));
  EXPECT_EQ(rows_of(m.problem, v, "model.layers.0.self_attn.o_proj.bias"), (Rows{{0, 64, 0}}));
}

// tiny-moonlight (tiny-deepseek-v3 without a q LoRA rank): q_proj [4 heads * (16 + 8), 64] is a
// column-parallel parameter of its own in vLLM, not part of a QKV fusion (MLA has no k/v
// projections): rank 0 of tp=2 holds rows 0..47 at row 0; kv_a_proj_with_mqa [16 + 8, 64] is
// replicated and apart. Megatron holds q_proj as linear_q_proj, rows split the same way.
TEST(StorageMap, LatentAttentionWithoutQLoraKeepsQProjApart) {
  const auto m = maps(tiny("tiny-moonlight.json"), "tp=2,ep=2,etp=1", "tp=2");
  const auto& v = m.vllm.of(Rank{m.problem.source_ranks()});
  EXPECT_EQ(parameter(v, "model.layers.1.self_attn.q_proj.weight").shape, (Shape{48, 64}));
  EXPECT_EQ(rows_of(m.problem, v, "model.layers.1.self_attn.q_proj.weight"), (Rows{{0, 48, 0}}));
  EXPECT_EQ(parameter(v, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight").shape, (Shape{24, 64}));
  EXPECT_EQ(rows_of(m.problem, v, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight"), (Rows{{0, 24, 0}}));
  const auto& t = m.megatron.of(Rank{1});
  EXPECT_EQ(parameter(t, "decoder.layers.1.self_attention.linear_q_proj.weight").shape, (Shape{48, 64}));
  EXPECT_EQ(rows_of(m.problem, t, "model.layers.1.self_attn.q_proj.weight"), (Rows{{48, 48, 0}}));
}

// The MTP layer (layer 3 of tiny-deepseek-v3): Megatron mtp.layers.0 with eh_proj column-parallel
// ([64, 128] over tp=2: 32 rows) and the decoder layer as mtp_model_layer; vLLM keeps enorm,
// hnorm, eh_proj (replicated) and shared_head.norm under their HF names and the decoder layer as
// mtp_block. Neither has an MTP embedding or head: they are the main model's.
TEST(StorageMap, MtpLayerAsMultiTokenPredictionLayerAndMtpBlock) {
  const auto m =
      maps(tiny("tiny-deepseek-v3.json", HfOptions{.include_mtp = true}), "tp=2,ep=2,etp=1", "tp=2");
  const auto& t = m.megatron.of(Rank{1});
  EXPECT_EQ(parameter(t, "mtp.layers.0.eh_proj.weight").shape, (Shape{32, 128}));
  EXPECT_EQ(rows_of(m.problem, t, "model.layers.3.eh_proj.weight"), (Rows{{32, 32, 0}}));
  EXPECT_EQ(parameter(t, "mtp.layers.0.final_layernorm.weight").shape, (Shape{64}));
  EXPECT_EQ(parameter(t, "mtp.layers.0.mtp_model_layer.mlp.router.expert_bias").dtype, DType::kFP32);
  const auto& v = m.vllm.of(Rank{m.problem.source_ranks()});
  EXPECT_EQ(parameter(v, "model.layers.3.eh_proj.weight").shape, (Shape{64, 128}));
  EXPECT_EQ(parameter(v, "model.layers.3.shared_head.norm.weight").shape, (Shape{64}));
  EXPECT_EQ(parameter(v, "model.layers.3.mtp_block.self_attn.fused_qkv_a_proj.weight").shape,
            (Shape{56, 64}));
  for (const auto* side : {&t, &v})
    for (const auto& p : side->parameters)
      EXPECT_FALSE(p.name.find("embed_tokens") != std::string::npos &&
                   p.name.find("layers.3") != std::string::npos)
          << p.name;
}

// Whether the rank has a parameter of that name.
bool has(const RankStorage& r, const std::string& name) {
  return std::ranges::any_of(r.parameters, [&](const FrameworkParameter& p) { return p.name == name; });
}

// 8 layers, pp=2, vp=2 (tp=1: rank = stage): stage 0 runs chunks 0 (layers 0-1) and 2 (4-5) as
// model0 and model1, each numbering its layers from 0; stage 1 runs chunks 1 (2-3) and 3 (6-7).
TEST(StorageMap, VirtualStagesNameEachChunksLayersLocally) {
  const auto m = maps(tiny("tiny-llama-8-layers.json"), "pp=2,vp=2", "tp=1");
  const auto& s0 = m.megatron.of(Rank{0});
  const auto& s1 = m.megatron.of(Rank{1});
  const auto qkv = [](int chunk, int local) {
    return "model" + std::to_string(chunk) + ".decoder.layers." + std::to_string(local) +
           ".self_attention.linear_qkv.weight";
  };
  EXPECT_EQ(rows_of(m.problem, s0, "model.layers.5.self_attn.k_proj.weight").size(), 2U);  // 2 groups
  EXPECT_TRUE(has(s0, qkv(1, 1)));  // layer 5 = chunk 2's second layer
  EXPECT_TRUE(has(s1, qkv(0, 0)));  // layer 2
  EXPECT_TRUE(has(s1, qkv(1, 1)));  // layer 7
  EXPECT_FALSE(has(s0, qkv(0, 2)));
  EXPECT_TRUE(has(s0, "model0.embedding.word_embeddings.weight"));
  EXPECT_TRUE(has(s1, "model1.output_layer.weight"));
  EXPECT_TRUE(has(s1, "model1.decoder.final_layernorm.weight"));
  EXPECT_EQ(s0.parameters.size(),
            1 + 4 * 6U);  // embedding + 4 layers: qkv, its norm, proj, fc1, its norm, fc2
}

// Et|t|t|mL over pp=2 with DeepSeek-V3's MTP layer: layer 2 (the last) on stage 0's model1, which
// holds the final norm with it; the MTP layer on stage 1's model1, with a copy of the embedding.
TEST(StorageMap, LayoutStringsPutTheFinalNormWithTheLastLayerAndMtpWithAnEmbedding) {
  const auto m = maps(tiny("tiny-deepseek-v3.json", HfOptions{.include_mtp = true}),
                      "tp=2,ep=2,etp=1,pp=2,layout=Et|t|t|mL", "tp=2");
  const auto& s0 = m.megatron.of(Rank{0});
  const auto& s1 = m.megatron.of(Rank{2});  // stage size tp*dp = 2
  EXPECT_TRUE(has(s0, "model1.decoder.final_layernorm.weight"));
  EXPECT_TRUE(has(s0, "model1.decoder.layers.0.mlp.router.weight"));  // layer 2
  EXPECT_TRUE(has(s1, "model0.decoder.layers.0.mlp.router.weight"));  // layer 1
  EXPECT_TRUE(has(s1, "model1.mtp.layers.0.eh_proj.weight"));
  EXPECT_TRUE(has(s1, "model1.embedding.word_embeddings.weight"));
  EXPECT_TRUE(has(s1, "model1.output_layer.weight"));
  EXPECT_FALSE(has(s1, "model1.decoder.final_layernorm.weight"));
}

// tiny-qwen2 ties its embeddings: with pp=2 the last stage's copy is its output layer's weight
// (shared_embedding_or_output_weight), the first stage's the embedding's.
TEST(StorageMap, TiedEmbeddingsCopyIsTheOutputLayersWeight) {
  const auto m = maps(tiny("tiny-qwen2.json"), "pp=2", "tp=1");
  EXPECT_TRUE(has(m.megatron.of(Rank{0}), "embedding.word_embeddings.weight"));
  EXPECT_TRUE(has(m.megatron.of(Rank{1}), "output_layer.weight"));
  EXPECT_FALSE(has(m.megatron.of(Rank{1}), "embedding.word_embeddings.weight"));
}

// Vocab 1023: Megatron tp=2 pads to 1024 (a multiple of 128*2), 512 rows per rank, rank 1's
// last row padding; vLLM tp=4 pads to 1024 (a multiple of 64), 256 rows per rank.
TEST(StorageMap, PaddedVocabRowsFollowTheRealOnes) {
  const auto m = maps(tiny("tiny-llama-vocab1023.json"), "tp=2", "tp=4");
  EXPECT_EQ(parameter(m.megatron.of(Rank{1}), "embedding.word_embeddings.weight").shape, (Shape{512, 64}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{1}), "model.embed_tokens.weight"), (Rows{{512, 511, 0}}));
  EXPECT_EQ(parameter(m.vllm.of(Rank{5}), "lm_head.weight").shape, (Shape{256, 64}));
  EXPECT_EQ(rows_of(m.problem, m.vllm.of(Rank{5}), "lm_head.weight"), (Rows{{768, 255, 0}}));
}

// Vocab 1001, which neither tp divides: Megatron tp=2 pads to 1024 and gives rank 0 rows
// [0, 512) and rank 1 the real rows [512, 1001), 489, then 23 padding rows (torch.chunk would
// give 501 and 500); vLLM tp=4 pads to 1024, 256 rows per rank, rank 3 real rows [768, 1001).
TEST(StorageMap, PaddedVocabPartitionsAreTheLogicalBoxesWhereTpDoesNotDivideTheVocab) {
  const auto m = maps(tiny("tiny-llama-vocab1001.json"), "tp=2", "tp=4");
  EXPECT_EQ(parameter(m.megatron.of(Rank{1}), "embedding.word_embeddings.weight").shape, (Shape{512, 64}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{0}), "model.embed_tokens.weight"), (Rows{{0, 512, 0}}));
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{1}), "model.embed_tokens.weight"), (Rows{{512, 489, 0}}));
  EXPECT_EQ(parameter(m.vllm.of(Rank{5}), "lm_head.weight").shape, (Shape{256, 64}));
  EXPECT_EQ(rows_of(m.problem, m.vllm.of(Rank{5}), "lm_head.weight"), (Rows{{768, 233, 0}}));
}

// Vocab 256 at Megatron tp=4 pads to 512 (a multiple of 128*4), 128 rows per rank: ranks 0 and 1
// hold the real rows, ranks 2 and 3 rows [256, 512), padding alone. Megatron still allocates
// their [128, 64] partition (VocabParallelEmbedding.__init__: num_embeddings_per_partition rows
// from VocabUtility.vocab_range_from_global_vocab_size on every rank; the output layer's
// ColumnParallelLinear likewise), so those ranks' parameters list it, with no region: nothing is
// read from it, and prepare(storage="framework") takes the buffer Megatron hands over. refit
// skipped the empty box and refused that buffer as a parameter the rank does not have.
TEST(StorageMap, AVocabPartitionOfPaddingAloneIsStillTheRanksParameter) {
  const auto m = maps(tiny("tiny-llama-bias.json"), "tp=4", "tp=2");
  EXPECT_EQ(rows_of(m.problem, m.megatron.of(Rank{1}), "lm_head.weight"), (Rows{{128, 128, 0}}));
  for (const int r : {2, 3}) {
    const auto& s = m.megatron.of(Rank{r});
    EXPECT_EQ(parameter(s, "embedding.word_embeddings.weight").shape, (Shape{128, 64}));
    EXPECT_EQ(parameter(s, "output_layer.weight").shape, (Shape{128, 64}));
    EXPECT_EQ(rows_of(m.problem, s, "model.embed_tokens.weight"), Rows{});
    EXPECT_EQ(rows_of(m.problem, s, "lm_head.weight"), Rows{});
  }
  const auto checked = check_storage(m.megatron, m.problem, true, "megatron");
  EXPECT_TRUE(checked) << checked.error().message;
}

// A version 2 manifest keeps both maps exactly (written again, the same text); version 1 has none.
TEST(StorageMap, ManifestVersion2RoundTripsBothMaps) {
  auto m = maps(tiny("tiny-qwen3-moe.json"), "tp=2,ep=2,etp=1", "tp=2");
  const StorageMaps both{.source = m.megatron, .destination = m.vllm};
  const auto text = write_manifest(m.problem, &both);
  EXPECT_NE(text.find("\"version\":2"), std::string::npos);
  const auto back = parse_manifest_with_storage(text);
  ASSERT_TRUE(back) << back.error().message;
  ASSERT_TRUE(back->storage);
  EXPECT_EQ(back->storage->source, m.megatron);
  EXPECT_EQ(back->storage->destination, m.vllm);
  EXPECT_EQ(write_manifest(back->problem, &*back->storage), text);
  const auto v1 = parse_manifest_with_storage(write_manifest(m.problem));
  ASSERT_TRUE(v1) << v1.error().message;
  EXPECT_FALSE(v1->storage);
}

// tiny-llama at tp=1 on both sides, as a manifest with both storage maps.
std::string tiny_llama_manifest() {
  auto m = maps(tiny("tiny-llama.json"), "tp=1", "tp=1");
  const StorageMaps both{.source = m.megatron, .destination = m.vllm};
  return write_manifest(m.problem, &both);
}

// `text` with its first `from` written `to`, read back.
Result<Manifest> edited(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return parse_manifest_with_storage(text);
}

// A region naming a tensor the manifest does not have is refused with its JSON path.
TEST(StorageMap, ManifestRefusesARegionOfAnUnknownTensor) {
  const auto refused =
      edited(tiny_llama_manifest(), "\"tensor\":\"model.norm.weight\"", "\"tensor\":\"model.nrom.weight\"");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("storage.source.ranks[0].regions["), std::string::npos)
      << refused.error().message;
  EXPECT_NE(refused.error().message.find("model.nrom.weight"), std::string::npos) << refused.error().message;
}

// A region's strides must lay its box out inside its parameter, one element per place: a stride
// whose reach passes 2^63 (it used to wrap and pass the bounds check), a zero stride along a dim of
// several elements, and a parameter of another dtype than the tensor's are refused with the path.
TEST(StorageMap, ManifestRefusesRegionsThatDoNotFitTheirParameter) {
  const auto text = tiny_llama_manifest();
  const auto with = [&](const std::string& from, const std::string& to) { return edited(text, from, to); };
  // The first region is the embedding's, [vocab, hidden] row-major: strides [hidden, 1].
  const auto first = text.find("\"strides\":[");
  const auto strides = text.substr(first, text.find(']', first) + 1 - first);
  for (const std::string bad :
       {"\"strides\":[144115188075855872,1]", "\"strides\":[0,0]", "\"strides\":[-64,1]"}) {
    const auto refused = with(strides, bad);
    ASSERT_FALSE(refused) << bad;
    EXPECT_NE(refused.error().message.find("storage.source.ranks[0].regions[0]"), std::string::npos)
        << refused.error().message;
  }
  const auto dtype = with("\"dtype\":\"bf16\"}],\"regions\"", "\"dtype\":\"fp32\"}],\"regions\"");
  ASSERT_FALSE(dtype);
  EXPECT_NE(dtype.error().message.find("is fp32, but tensor"), std::string::npos) << dtype.error().message;
}

// A map's framework is any framework's name, which messages print: one with a terminal escape
// is refused, naming its path.
TEST(StorageMap, ManifestRefusesAFrameworkNameWithAnEscape) {
  const auto refused =
      edited(tiny_llama_manifest(), "\"framework\":\"vllm\"", "\"framework\":\"\\u001b[31mvllm\"");
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("storage.destination.framework: a control character"),
            std::string::npos)
      << refused.error().message;
}

// A misspelt field is an error naming it, not a default taken silently.
TEST(StorageMap, ManifestRefusesUnknownFields) {
  const auto text = tiny_llama_manifest();
  for (const auto& [from, to, path] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"\"placements\"", "\"placement\"", "tensors[0].source.placement: unknown field"},
           {"\"ranks\":[0]", "\"rank\":[0]", "tensors[0].source.rank: unknown field"},
           {"\"source_ranks\"", "\"sources\"", "sources: unknown field"},
           {"\"strides\"", "\"stride\"", "storage.source.ranks[0].regions[0].stride: unknown field"}}) {
    const auto refused = edited(text, from, to);
    ASSERT_FALSE(refused) << to;
    EXPECT_NE(refused.error().message.find(path), std::string::npos) << refused.error().message;
  }
}

}  // namespace
}  // namespace refit::models
