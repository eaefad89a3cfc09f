// Whole reshard problems for the two reference refits: bytes on every rank against hand-computed
// values, and every destination element held by some source rank.
#include <gtest/gtest.h>

#include "error_code.h"

#include "refit/core/overlap.h"
#include "refit/core/quantized_problem.h"
#include "refit/models/builtin_models.h"
#include "refit/models/fp8_weights.h"
#include "refit/models/hf_config.h"
#include "refit/models/problem_builder.h"
#include "refit/models/rank_bytes.h"

namespace refit::models {
namespace {

ReshardProblem build(const ModelSpec& model, const char* train, const char* infer) {
  auto problem = build_problem(model, *parse_megatron(train), *parse_vllm(infer));
  EXPECT_TRUE(problem) << problem.error().message;
  return *problem;
}

// For every tensor: the pieces of each destination shard add up to the shard's volume (the
// pieces are disjoint, so the shard is covered), and every piece has a source holder.
void expect_every_destination_element_covered(const ReshardProblem& p) {
  for (const auto& t : p.tensors()) {
    auto overlap = overlaps(t.source, t.destination);
    ASSERT_TRUE(overlap) << t.tensor.name << ": " << overlap.error().message;
    for (const auto& d : overlap->destinations) {
      std::int64_t covered = 0;
      for (const auto& piece : d.pieces) {
        covered += piece.box.volume();
        EXPECT_FALSE(overlap->holders(piece).empty()) << t.tensor.name;
      }
      ASSERT_EQ(covered, d.shard.box.volume()) << t.tensor.name << " " << d.shard.box.to_string();
    }
  }
}

void expect_ranks(const std::vector<Bytes>& bytes, std::size_t first, std::size_t last, std::int64_t expected,
                  const char* what) {
  for (std::size_t r = first; r <= last; ++r) EXPECT_EQ(bytes[r].value, expected) << what << " " << r;
}

TEST(ReferenceRefit, Qwen3_235B_Tp4Pp8Ep16_To_Tp8Engines16) {
  // Training: tp=4, pp=8, ep=16, etp=1 -> dp = 16/4 = 4, 16 ranks per stage, 128 ranks, edp = 1.
  // 94 layers over 8 stages: 7 stages of 12 (ceil(94/8)), the last 10. BF16 = 2 bytes.
  // One layer on one training rank (elements):
  //   q_proj, o_proj 8192*4096/4 = 8,388,608 each; k_proj, v_proj 512*4096/4 = 524,288 each;
  //   q_norm, k_norm 2*128; layernorms 2*4096; router 128*4096 = 524,288 (replicated);
  //   experts 128/16 = 8 per EP rank: 8*3*1536*4096 = 150,994,944  -> 169,353,472.
  //   embed_tokens / lm_head: the vocab padded to 152,064 (a multiple of 128*4), 38,016 rows
  //   per rank, real rows 38,016 on tp ranks 0-2 and 151,936 - 3*38,016 = 37,888 on tp rank 3:
  //   155,713,536 and 155,189,248 elements (torch.chunk's 37,984 rows would be 155,582,464).
  // stage 0:   155,582,464 + 12*169,353,472 = 2,187,824,128 el = 4,375,648,256 B
  //            + 32 rows * 4096 * 2 B = 4,375,910,400 B on tp ranks 0-2, - 96 rows = 4,374,861,824 B
  // stage 1-6: 12*169,353,472             = 2,032,241,664 el = 4,064,483,328 B
  // stage 7:   10*169,353,472 + 4096 + 155,582,464 = 1,849,121,280 el = 3,698,242,560 B
  //            + 262,144 B = 3,698,504,704 B on tp ranks 0-2, - 786,432 B = 3,697,456,128 B
  // Inference: 16 engines of tp=8, no EP: 128 ranks, each a full model over TP 8. Per layer:
  //   q_proj, o_proj 8192*4096/8 = 4,194,304 each; 4 kv heads < 8: each rank one head,
  //   k_proj, v_proj 128*4096 = 524,288 each; norms 256 + 8192; router 524,288;
  //   experts sharded on the intermediate dim: 3 * 128*(1536/8)*4096 = 301,989,888
  //   -> 311,959,808 * 94 = 29,324,221,952; embed, lm_head 151936/8*4096 = 77,791,232 each,
  //   norm 4096 -> 29,479,808,512 el = 58,959,617,024 B on every inference rank.
  auto model = builtin_model("qwen3-235b-a22b");
  ASSERT_TRUE(model);
  const auto p = build(*model, "tp=4,pp=8,ep=16,etp=1", "tp=8,engines=16");
  EXPECT_EQ(p.source_ranks(), 128);
  EXPECT_EQ(p.destination_ranks(), 128);
  EXPECT_EQ(p.tensors().size(), model->tensors.size());
  const auto bytes = rank_bytes(p);
  for (std::size_t r = 0; r < 16; ++r)
    EXPECT_EQ(bytes.source[r].value, r % 4 == 3 ? 4'374'861'824 : 4'375'910'400) << "training rank " << r;
  expect_ranks(bytes.source, 16, 111, 4'064'483'328, "training rank");
  for (std::size_t r = 112; r < 128; ++r)
    EXPECT_EQ(bytes.source[r].value, r % 4 == 3 ? 3'697'456'128 : 3'698'504'704) << "training rank " << r;
  expect_ranks(bytes.destination, 0, 127, 58'959'617'024, "inference rank");
  expect_every_destination_element_covered(p);
}

TEST(ReferenceRefit, DeepseekV3_Pp16Ep16_To_Tp32Engines8) {
  // Training: pp=16, ep=16 -> tp=1, dp = 16, 16 ranks per stage, 256 ranks, edp = 1.
  // 61 layers over 16 stages: stages 0-14 take 4 (ceil(61/16)), stage 15 takes layer 60.
  // Layers 0-2 are dense, 3-60 MoE. tp=1: every non-expert weight is whole on its stage.
  //   MLA attention 187,107,328 + layernorms 14,336 = 187,121,664 per layer;
  //   dense layer: + 3*18432*7168 = 396,361,728 -> 583,483,392;
  //   MoE layer: + shared 3*2048*7168 = 44,040,192 + router 256*7168 = 1,835,008 + bias 256
  //     + 256/16 = 16 experts * 3*2048*7168 = 704,643,072 -> 937,640,192.
  //   embed_tokens, lm_head 129280*7168 = 926,679,040.
  // 2 B per element, but the router bias is fp32: 2 B more for each of its 256 per MoE layer.
  // stage 0:    926,679,040 + 3*583,483,392 + 937,640,192 = 3,614,769,408 el = 7,229,538,816 B
  //             + 512 = 7,229,539,328 B
  // stage 1-14: 4*937,640,192 = 3,750,560,768 el = 7,501,121,536 B + 4*512 = 7,501,123,584 B
  // stage 15:   937,640,192 + 7168 + 926,679,040 = 1,864,326,400 el = 3,728,652,800 B
  //             + 512 = 3,728,653,312 B
  // Inference: 8 engines of tp=32, no EP; every rank the same. Per layer:
  //   q_a_proj 1536*7168 and kv_a_proj 576*7168 replicated, their norms 1536 + 512,
  //   q_b_proj 24576/32*1536 = 1,179,648, kv_b_proj 32768/32*512 = 524,288,
  //   o_proj 7168*16384/32 = 3,670,016, layernorms 14,336 -> 20,529,152;
  //   dense layer + 3*(18432/32)*7168 = 12,386,304 -> 32,915,456;
  //   MoE layer + routed 3*256*(2048/32)*7168 = 352,321,536 + shared 3*64*7168 = 1,376,256
  //     + router and bias 1,835,264 -> 376,062,208;
  //   embed, lm_head 129280/32 = 4040 rows * 7168 = 28,958,720 each; norm 7168.
  //   3*32,915,456 + 58*376,062,208 + 2*28,958,720 + 7168 = 21,968,279,040 el
  //   = 43,936,558,080 B, + 58*512 for the fp32 router biases = 43,936,587,776 B.
  auto model = builtin_model("deepseek-v3");
  ASSERT_TRUE(model);
  const auto p = build(*model, "pp=16,ep=16", "tp=32,engines=8");
  EXPECT_EQ(p.source_ranks(), 256);
  EXPECT_EQ(p.destination_ranks(), 256);
  const auto bytes = rank_bytes(p);
  expect_ranks(bytes.source, 0, 15, 7'229'539'328, "training rank");
  expect_ranks(bytes.source, 16, 239, 7'501'123'584, "training rank");
  expect_ranks(bytes.source, 240, 255, 3'728'653'312, "training rank");
  expect_ranks(bytes.destination, 0, 255, 43'936'587'776, "inference rank");
  expect_every_destination_element_covered(p);
}

TEST(RankBytes, FP8InFlightLeavesTrainingRanksBf16AndInferenceRanksFp8) {
  // small-llama-blocks (hidden 256, 4 heads, intermediate 512, vocab 1024, 2 layers), Megatron
  // tp=2 -> vLLM tp=2, block FP8. An inference rank holds half of every linear weight in fp8,
  // 2 x (4 x 256 x 256 + 3 x 512 x 256) / 2 = 655,360 B, and their scales: per layer q, k, v, o
  // 2 blocks each, gate, up, down 4 each, 20 x 4 B = 80 B, so 160 B; embedding and lm_head half
  // each in bf16, 2 x 512 x 256 x 2 = 524,288 B; 5 norms of 256 in bf16, 2,560 B. 1,182,368 B.
  // A training rank still holds bf16 and no scales: the same bytes as without quantization.
  auto model = load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/small-llama-blocks.json");
  ASSERT_TRUE(model);
  const auto bf16 = build(*model, "tp=2", "tp=2");
  const auto fp8 = quantize_problem(bf16, {.scheme = QuantScheme::kFp8Block128}, [](const TensorSpec& t) {
                     return fp8_engine_quantizes(t.name);
                   }).value();
  const auto before = rank_bytes(bf16), after = rank_bytes(fp8);
  EXPECT_EQ(after.source, before.source);
  EXPECT_EQ(after.destination, (std::vector<Bytes>{Bytes{1'182'368}, Bytes{1'182'368}}));
}

TEST(ReferenceRefit, ExpertParallelInferenceHoldsEachExpertOnce) {
  // tiny-qwen3-moe on vLLM tp=2, dp=2, ep=on: the stacked experts, 2 layers * 3 * 8*32*64
  // = 98,304 elements, are split over EP = 4 ranks without replication, so the inference ranks
  // together hold them exactly once (2 bytes each), where without EP each of the 2 replicas would.
  auto model = load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json");
  ASSERT_TRUE(model);
  const auto p = build(*model, "tp=2,pp=2,ep=2,etp=1", "tp=2,dp=2,ep=on");
  EXPECT_EQ(p.source_ranks(), 4);
  EXPECT_EQ(p.destination_ranks(), 4);
  std::int64_t expert_bytes = 0;
  for (const auto& t : p.tensors()) {
    if (t.tensor.shape.size() != 3) continue;
    for (std::int32_t r = 4; r < 8; ++r) expert_bytes += t.destination.local_box(Rank{r})->volume() * 2;
  }
  EXPECT_EQ(expert_bytes, 2 * 98'304);
  expect_every_destination_element_covered(p);
}

TEST(ReferenceRefit, ErrorsNameTheSide) {
  auto model = builtin_model("qwen3-235b-a22b");
  ASSERT_TRUE(model);
  auto bad_train = build_problem(*model, *parse_megatron("tp=3"), *parse_vllm("tp=8"));
  ASSERT_FALSE(bad_train);
  EXPECT_EQ(bad_train.error().code, ErrorCode::kMismatch);
  EXPECT_NE(bad_train.error().message.find("training layout tp=3"), std::string::npos);
  auto bad_infer = build_problem(*model, *parse_megatron("tp=4"), *parse_vllm("tp=8,dp=3,ep=on"));
  ASSERT_FALSE(bad_infer);
  EXPECT_EQ(bad_infer.error().code, ErrorCode::kMismatch);
  EXPECT_NE(bad_infer.error().message.find("inference layout"), std::string::npos);
  EXPECT_NE(bad_infer.error().message.find("128 routed experts"), std::string::npos);
}

}  // namespace
}  // namespace refit::models
