// FP8 in flight in the frameworks' parameters: vLLM's block-FP8 weights and their
// weight_scale_inv parameters (one fp32 per 128x128 block of the fused parameter), Megatron's
// bf16 weights that the training ranks quantize, against hand-computed offsets. The byte-for-byte
// check against vLLM's own construction is tests/python/test_storage.py.
#include <gtest/gtest.h>

#include "refit/core/quantized_problem.h"
#include "refit/models/fp8_weights.h"
#include "refit/models/hf_config.h"
#include "refit/models/problem_builder.h"
#include "refit/models/storage_map.h"
#include "storage_lookup.h"

namespace refit::models {
namespace {

struct Maps {
  ReshardProblem problem;
  Result<StorageMap> megatron;
  Result<StorageMap> vllm;
};

Maps fp8_maps(const char* file, const char* train, const char* infer, QuantSite site = QuantSite::kSender) {
  const auto m = load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/" + file, {}).value();
  const auto t = parse_megatron(train).value();
  const auto i = parse_vllm(infer).value();
  auto problem =
      quantize_problem(build_problem(m, t, i).value(), {.scheme = QuantScheme::kFp8Block128, .site = site},
                       [](const TensorSpec& s) { return fp8_engine_quantizes(s.name); });
  EXPECT_TRUE(problem) << problem.error().message;
  return Maps{.problem = *problem,
              .megatron = megatron_storage(m, t, *problem),
              .vllm = vllm_storage(m, i, *problem)};
}

using testing::index_of;
using testing::parameter;

// The regions of `tensor` on the rank, as (box, parameter name, offset, strides).
struct Placed {
  Box box;
  std::string parameter;
  std::int64_t offset = 0;
  Shape strides;
  bool operator==(const Placed&) const = default;
  friend void PrintTo(const Placed& p, std::ostream* os) {
    *os << p.box.to_string() << " in " << p.parameter << " at " << p.offset << " strides";
    for (const auto s : p.strides) *os << " " << s;
  }
};
std::vector<Placed> regions_of(const ReshardProblem& p, const RankStorage& r, const std::string& tensor) {
  std::vector<Placed> out;
  for (const auto& g : r.regions)
    if (g.tensor == index_of(p, tensor))
      out.push_back({g.box, r.parameters[static_cast<std::size_t>(g.parameter)].name, g.offset, g.strides});
  return out;
}

// small-llama-gqa-blocks: hidden 256, 8 q heads / 2 kv heads of 128. vLLM tp=2, rank 0 (global
// 2): qkv_proj [q 512; k 128; v 128] x 256 in fp8, weight_scale_inv [768/128, 256/128] = [6, 2]
// fp32; q's scales are block rows 0..3 at element 0, k's block row 4 at 4 * 2 = 8, v's block row
// 5 at 10.
TEST(QuantizedStorage, VllmKeepsEachPartsScalesAtItsBlockRowsOfTheFusedScales) {
  const auto m = fp8_maps("small-llama-gqa-blocks.json", "tp=2", "tp=2");
  ASSERT_TRUE(m.vllm) << m.vllm.error().message;
  const auto& r = m.vllm->of(Rank{2});
  const std::string qkv = "model.layers.1.self_attn.qkv_proj.weight";
  EXPECT_EQ(parameter(r, qkv).shape, (Shape{768, 256}));
  EXPECT_EQ(parameter(r, qkv).dtype, DType::kFP8E4M3);
  EXPECT_EQ(parameter(r, qkv + "_scale_inv").shape, (Shape{6, 2}));
  EXPECT_EQ(parameter(r, qkv + "_scale_inv").dtype, DType::kFP32);
  const std::string l = "model.layers.1.self_attn.";
  EXPECT_EQ(regions_of(m.problem, r, l + "q_proj.weight_scale_inv"),
            (std::vector<Placed>{{Box{{0, 0}, {4, 2}}, qkv + "_scale_inv", 0, {2, 1}}}));
  EXPECT_EQ(regions_of(m.problem, r, l + "k_proj.weight_scale_inv"),
            (std::vector<Placed>{{Box{{0, 0}, {1, 2}}, qkv + "_scale_inv", 8, {2, 1}}}));
  EXPECT_EQ(regions_of(m.problem, r, l + "v_proj.weight_scale_inv"),
            (std::vector<Placed>{{Box{{0, 0}, {1, 2}}, qkv + "_scale_inv", 10, {2, 1}}}));
  // Norms and the embedding stay bf16.
  EXPECT_EQ(parameter(r, "model.layers.1.input_layernorm.weight").dtype, DType::kBF16);
  EXPECT_EQ(parameter(r, "model.embed_tokens.weight").dtype, DType::kBF16);
}

// Megatron tp=1 holds the bf16 weight its ranks quantize, q in two regions of linear_qkv (group
// 0's q rows 0..511 at row 0, group 1's 512..1023 at row 768 = 512 + 128 + 128), and no scales:
// the senders make them.
TEST(QuantizedStorage, MegatronHoldsBf16WeightsAndNoScales) {
  const auto m = fp8_maps("small-llama-gqa-blocks.json", "tp=1", "tp=2");
  ASSERT_TRUE(m.megatron) << m.megatron.error().message;
  const auto& r = m.megatron->of(Rank{0});
  const std::string qkv = "decoder.layers.0.self_attention.linear_qkv.weight";
  EXPECT_EQ(parameter(r, qkv).dtype, DType::kBF16);
  EXPECT_EQ(regions_of(m.problem, r, "model.layers.0.self_attn.q_proj.weight"),
            (std::vector<Placed>{{Box{{0, 0}, {512, 256}}, qkv, 0, {256, 1}},
                                 {Box{{512, 0}, {512, 256}}, qkv, 768 * 256, {256, 1}}}));
  EXPECT_TRUE(regions_of(m.problem, r, "model.layers.0.self_attn.q_proj.weight_scale_inv").empty());
  for (const auto& p : r.parameters) EXPECT_FALSE(p.name.ends_with("_scale_inv")) << p.name;
}

// Trained in fp8 (Transformer Engine's fp8 parameters), Megatron tp=2 rank 0 holds linear_qkv
// [q 512; k 128; v 128] x 256 of query group 0 in fp8 and its rowwise scales [768/128,
// roundup(256/128, 4)] = [6, 4] fp32, rows padded from 2 to 4 scales: q's block rows 0..3 at
// element 0, k's block row 4 at 4 * 4 = 16, v's at 20, each row 4 apart. linear_proj [256, 512/2]
// has scales [2, roundup(2, 4)] = [2, 4]. vLLM's side is as when quantized at the senders.
TEST(QuantizedStorage, MegatronTrainedInFp8KeepsTransformerEnginesPaddedRowwiseScales) {
  const auto m = fp8_maps("small-llama-gqa-blocks.json", "tp=2", "tp=2", QuantSite::kTraining);
  ASSERT_TRUE(m.megatron) << m.megatron.error().message;
  ASSERT_TRUE(m.vllm) << m.vllm.error().message;
  const auto& r = m.megatron->of(Rank{0});
  const std::string a = "decoder.layers.1.self_attention.";
  const std::string scales = a + "linear_qkv.weight._rowwise_scale_inv";
  EXPECT_EQ(parameter(r, a + "linear_qkv.weight").dtype, DType::kFP8E4M3);
  EXPECT_EQ(parameter(r, scales).shape, (Shape{6, 4}));
  EXPECT_EQ(parameter(r, scales).dtype, DType::kFP32);
  EXPECT_EQ(parameter(r, a + "linear_proj.weight._rowwise_scale_inv").shape, (Shape{2, 4}));
  const std::string l = "model.layers.1.self_attn.";
  EXPECT_EQ(regions_of(m.problem, r, l + "q_proj.weight_scale_inv"),
            (std::vector<Placed>{{Box{{0, 0}, {4, 2}}, scales, 0, {4, 1}}}));
  EXPECT_EQ(regions_of(m.problem, r, l + "k_proj.weight_scale_inv"),
            (std::vector<Placed>{{Box{{0, 0}, {1, 2}}, scales, 16, {4, 1}}}));
  EXPECT_EQ(regions_of(m.problem, r, l + "v_proj.weight_scale_inv"),
            (std::vector<Placed>{{Box{{0, 0}, {1, 2}}, scales, 20, {4, 1}}}));
  EXPECT_EQ(parameter(r, a + "linear_qkv.layer_norm_weight").dtype, DType::kBF16);
  EXPECT_EQ(parameter(m.vllm->of(Rank{2}), "model.layers.1.self_attn.qkv_proj.weight_scale_inv").shape,
            (Shape{6, 2}));
}

// small-qwen3-moe-blocks: 4 experts of intermediate 256, hidden 256. vLLM EP over dp=2: rank 0
// (global 2, after Megatron's 2) holds experts 0, 1: w13_weight [2, 512, 256] fp8, w13_weight_scale_inv
// [2, 512/128, 256/128] = [2, 4, 2]; up's scales are block rows 2..3 of each expert, at element
// 2 * 2 = 4, experts 4 * 2 = 8 apart.
TEST(QuantizedStorage, VllmKeepsGateThenUpScalesPerExpert) {
  const auto m = fp8_maps("small-qwen3-moe-blocks.json", "tp=2,ep=2,etp=1", "tp=1,dp=2,ep=1");
  ASSERT_TRUE(m.vllm) << m.vllm.error().message;
  const auto& r = m.vllm->of(Rank{2});
  const std::string w13 = "model.layers.0.mlp.experts.w13_weight";
  EXPECT_EQ(parameter(r, w13).shape, (Shape{2, 512, 256}));
  EXPECT_EQ(parameter(r, w13 + "_scale_inv").shape, (Shape{2, 4, 2}));
  EXPECT_EQ(regions_of(m.problem, r, "model.layers.0.mlp.experts.up_proj_scale_inv"),
            (std::vector<Placed>{{Box{{0, 0, 0}, {2, 2, 2}}, w13 + "_scale_inv", 4, {8, 2, 1}}}));
}

// tiny-llama: q 64 rows, k 32, v 32 of 64 columns. vLLM's qkv_proj [128, 64] would put q's rows
// and k's in one 128-row block, which one scale cannot serve (vLLM's validate_fp8_block_shape
// refuses such a merged weight too).
TEST(QuantizedStorage, APartInsideABlockOfItsFusedParameterIsRefusedNamingIt) {
  const auto m = fp8_maps("tiny-llama.json", "tp=1", "tp=1");
  ASSERT_FALSE(m.vllm);
  EXPECT_NE(m.vllm.error().message.find("tensor 'model.layers.0.self_attn.k_proj.weight_scale_inv'"),
            std::string::npos)
      << m.vllm.error().message;
  EXPECT_NE(m.vllm.error().message.find("parameter 'model.layers.0.self_attn.qkv_proj.weight'"),
            std::string::npos)
      << m.vllm.error().message;
}

// Megatron's GLU-interleaved expert fc1 (blocks of 128 gate and 128 up rows) with fp8 in flight:
// its fp8 values and 128x128 block scales are refused, not guessed.
TEST(QuantizedStorage, GluInterleavedExpertsWithFp8AreRefused) {
  const auto maps = fp8_maps("small-qwen3-moe-blocks.json", "tp=2,ep=2,etp=1,glu_interleave=128", "tp=2");
  ASSERT_FALSE(maps.megatron);
  EXPECT_NE(maps.megatron.error().message.find("glu_interleave=128 with fp8 quantization"), std::string::npos)
      << maps.megatron.error().message;
  EXPECT_TRUE(maps.vllm) << maps.vllm.error().message;
}

}  // namespace
}  // namespace refit::models
