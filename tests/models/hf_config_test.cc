#include <algorithm>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_code.h"

#include "refit/models/hf_config.h"

namespace refit::models {
namespace {

std::string data_path(const std::string& file) {
  return std::string(REFIT_TEST_DATA_DIR) + "/models/" + file;
}

std::string read_text(const std::string& file) {
  std::ifstream in(data_path(file));
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

const WeightTensor* find(const ModelSpec& m, const std::string& name) {
  const auto it = std::ranges::find(m.tensors, name, [](const auto& t) { return t.spec.name; });
  return it == m.tensors.end() ? nullptr : &*it;
}

Shape shape_of(const ModelSpec& m, const std::string& name) {
  const auto* t = find(m, name);
  return t ? t->spec.shape : Shape{};
}

struct TinyModel {
  const char* file;
  const char* architecture;
  std::size_t tensors;
  std::int64_t parameters;
};

// hidden 64, 2 layers, 4 q heads of 16, 2 kv heads, vocab 256 unless said otherwise.
// llama: layer q,o 2*64*64 + k,v 2*32*64 + MLP 3*128*64 + norms 2*64 = 36,992;
//   2 layers + embed, lm_head 2*256*64 + norm 64 = 106,816; tensors 1 + 2*9 + 2 = 21.
// qwen2 (tied, q/k/v biases 64+32+32): layer 37,120; 2*37,120 + 16,384 + 64 = 90,688;
//   tensors 1 + 2*12 + 1 (no lm_head) = 26.
// qwen3 (q_norm, k_norm [16]): layer 37,024; 74,048 + 32,768 + 64 = 106,880; tensors 25.
// qwen3_moe (8 experts of 32): layer attention 12,288 + 32 + norms 128 + router 8*64
//   + experts 8*3*32*64 = 62,112; 124,224 + 32,832 = 157,056; tensors 1 + 2*12 + 2 = 27.
// mixtral (4 experts of 64): layer 12,288 + 128 + router 256 + 4*3*64*64 = 61,824;
//   123,648 + 32,832 = 156,480; tensors 1 + 2*10 + 2 = 23.
// deepseek_v3 (3 layers, first dense; q_lora 32, kv_lora 16, nope 16, rope 8, v 16):
//   MLA q_a 32*64 + 32 + q_b 96*32 + kv_a 24*64 + 16 + kv_b 128*16 + o 64*64 = 12,848, norms 128;
//   dense layer + 3*128*64 = 37,552; MoE layer + router 512 + bias 8 + 8*3*32*64 + shared
//   3*32*64 = 68,792; 37,552 + 2*68,792 + 32,832 = 207,968; tensors 1 + 12 + 2*17 + 2 = 49.
constexpr TinyModel kTiny[] = {
    {"tiny-llama.json", "llama", 21, 106'816},     {"tiny-qwen2.json", "qwen2", 26, 90'688},
    {"tiny-qwen3.json", "qwen3", 25, 106'880},     {"tiny-qwen3-moe.json", "qwen3_moe", 27, 157'056},
    {"tiny-mixtral.json", "mixtral", 23, 156'480}, {"tiny-deepseek-v3.json", "deepseek_v3", 49, 207'968},
};

class TinyConfigs : public ::testing::TestWithParam<TinyModel> {};

TEST_P(TinyConfigs, TensorsAndTotals) {
  auto model = load_hf_config(data_path(GetParam().file));
  ASSERT_TRUE(model) << model.error().message;
  EXPECT_EQ(model->architecture, GetParam().architecture);
  EXPECT_EQ(model->tensors.size(), GetParam().tensors);
  EXPECT_EQ(model->parameter_count(), GetParam().parameters);
  EXPECT_EQ(model->dtype, DType::kBF16);
  EXPECT_EQ(shape_of(*model, "model.embed_tokens.weight"), (Shape{256, 64}));
}

INSTANTIATE_TEST_SUITE_P(Architectures, TinyConfigs, ::testing::ValuesIn(kTiny),
                         [](const auto& info) { return std::string(info.param.architecture); });

TEST(HfConfig, LlamaShapesAreOutByIn) {
  auto m = load_hf_config(data_path("tiny-llama.json"));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(shape_of(*m, "model.layers.1.self_attn.q_proj.weight"), (Shape{64, 64}));
  EXPECT_EQ(shape_of(*m, "model.layers.1.self_attn.k_proj.weight"), (Shape{32, 64}));
  EXPECT_EQ(shape_of(*m, "model.layers.1.mlp.down_proj.weight"), (Shape{64, 128}));
  EXPECT_EQ(shape_of(*m, "lm_head.weight"), (Shape{256, 64}));
  EXPECT_EQ(find(*m, "model.layers.0.mlp.gate_proj.weight")->projection, Projection::kGate);
  EXPECT_EQ(find(*m, "lm_head.weight")->section, Section::kHead);
}

TEST(HfConfig, Qwen2HasQkvBiasesAndTiedEmbeddings) {
  auto m = load_hf_config(data_path("tiny-qwen2.json"));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_TRUE(m->tied_embeddings);
  EXPECT_EQ(find(*m, "lm_head.weight"), nullptr);
  EXPECT_EQ(shape_of(*m, "model.layers.0.self_attn.k_proj.bias"), (Shape{32}));
  EXPECT_EQ(find(*m, "model.layers.0.self_attn.k_proj.bias")->kind, TensorKind::kKeyValue);
  EXPECT_EQ(find(*m, "model.layers.0.self_attn.o_proj.bias"), nullptr);
}

// Which q/k/v and o biases a config gives, as vLLM's model classes read it.
struct AttentionBiases {
  const char* file;
  nlohmann::json fields;  // set on the file's config
  bool qkv;               // q/k/v_proj.bias
  bool o;                 // o_proj.bias
};

class AttentionBiasConfigs : public ::testing::TestWithParam<AttentionBiases> {};

TEST_P(AttentionBiasConfigs, QkvAndOBiasesAsVllmReadsTheConfig) {
  const auto& b = GetParam();
  auto j = nlohmann::json::parse(read_text(b.file));
  j.update(b.fields);
  auto m = parse_hf_config(j.dump());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(find(*m, "model.layers.0.self_attn.v_proj.bias") != nullptr, b.qkv) << b.fields.dump();
  EXPECT_EQ(find(*m, "model.layers.0.self_attn.o_proj.bias") != nullptr, b.o) << b.fields.dump();
}

INSTANTIATE_TEST_SUITE_P(
    Cases, AttentionBiasConfigs,
    ::testing::Values(
        // LlamaDecoderLayer: attention_bias or bias for all four; a qkv_bias key (InternLM3)
        // decides q/k/v alone.
        AttentionBiases{"tiny-llama.json", {{"attention_bias", true}}, true, true},
        AttentionBiases{"tiny-llama.json", {{"bias", true}}, true, true},
        AttentionBiases{"tiny-llama.json", {{"attention_bias", false}, {"qkv_bias", true}}, true, false},
        AttentionBiases{"tiny-llama.json", {{"attention_bias", true}, {"qkv_bias", false}}, false, true},
        AttentionBiases{"tiny-llama.json", {{"attention_bias", true}, {"qkv_bias", nullptr}}, false, true},
        // Qwen3Attention / Qwen3MoeAttention: qkv_proj takes attention_bias, o_proj never a bias.
        AttentionBiases{"tiny-qwen3.json", {{"attention_bias", true}}, true, false},
        AttentionBiases{"tiny-qwen3-moe.json", {{"attention_bias", true}}, true, false},
        AttentionBiases{"tiny-qwen3.json", {{"attention_bias", false}}, false, false}));

TEST(HfConfig, StackedAndPerExpertNames) {
  auto stacked = load_hf_config(data_path("tiny-qwen3-moe.json"));
  auto split = load_hf_config(data_path("tiny-qwen3-moe.json"), HfOptions{.per_expert = true});
  ASSERT_TRUE(stacked && split);
  const auto* gate = find(*stacked, "model.layers.1.mlp.experts.gate_proj");
  ASSERT_NE(gate, nullptr);
  EXPECT_EQ(gate->spec.shape, (Shape{8, 32, 64}));
  EXPECT_TRUE(gate->is_stacked());
  EXPECT_EQ(shape_of(*stacked, "model.layers.1.mlp.experts.down_proj"), (Shape{8, 64, 32}));
  EXPECT_EQ(shape_of(*stacked, "model.layers.1.self_attn.q_norm.weight"), (Shape{16}));
  // Per expert: 2 layers x 8 experts x 3 = 48 tensors instead of 6.
  EXPECT_EQ(split->tensors.size(), stacked->tensors.size() + 48 - 6);
  const auto* one = find(*split, "model.layers.1.mlp.experts.7.up_proj.weight");
  ASSERT_NE(one, nullptr);
  EXPECT_EQ(one->spec.shape, (Shape{32, 64}));
  EXPECT_EQ(one->expert, 7);
  EXPECT_EQ(one->routed_experts, 8);
}

TEST(HfConfig, MixtralUsesBlockSparseMoeNames) {
  auto m = load_hf_config(data_path("tiny-mixtral.json"));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(shape_of(*m, "model.layers.0.block_sparse_moe.gate.weight"), (Shape{4, 64}));
  EXPECT_EQ(find(*m, "model.layers.0.block_sparse_moe.experts.w3")->projection, Projection::kUp);
  EXPECT_EQ(shape_of(*m, "model.layers.0.block_sparse_moe.experts.w2"), (Shape{4, 64, 64}));
}

TEST(HfConfig, DeepseekLatentAttentionAndDenseFirstLayers) {
  auto m = load_hf_config(data_path("tiny-deepseek-v3.json"));
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->num_kv_heads, 0);  // MLA: no k/v projections
  EXPECT_EQ(shape_of(*m, "model.layers.0.mlp.gate_proj.weight"), (Shape{128, 64}));
  EXPECT_EQ(find(*m, "model.layers.0.mlp.experts.gate_proj"), nullptr);
  EXPECT_EQ(shape_of(*m, "model.layers.1.self_attn.q_b_proj.weight"), (Shape{4 * 24, 32}));
  EXPECT_EQ(shape_of(*m, "model.layers.1.self_attn.kv_a_proj_with_mqa.weight"), (Shape{24, 64}));
  EXPECT_EQ(shape_of(*m, "model.layers.1.self_attn.kv_b_proj.weight"), (Shape{4 * 32, 16}));
  EXPECT_EQ(shape_of(*m, "model.layers.1.self_attn.o_proj.weight"), (Shape{64, 64}));
  EXPECT_EQ(shape_of(*m, "model.layers.1.mlp.gate.e_score_correction_bias"), (Shape{8}));
  EXPECT_EQ(shape_of(*m, "model.layers.2.mlp.shared_experts.down_proj.weight"), (Shape{64, 32}));
  EXPECT_EQ(find(*m, "model.layers.1.self_attn.q_a_proj.weight")->kind, TensorKind::kReplicated);
  EXPECT_EQ(find(*m, "model.layers.3.enorm.weight"), nullptr);  // MTP only on request
}

TEST(HfConfig, DeepseekMtpLayerOnRequest) {
  // MTP layer 3: MoE layer 68,792 + 3 norms of 64 + eh_proj 64*128 = 77,176 more, 4 + 17 more
  // tensors, all on the last pipeline stage; its embedding and head are the main model's.
  auto m = load_hf_config(data_path("tiny-deepseek-v3.json"), HfOptions{.include_mtp = true});
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->parameter_count(), 207'968 + 77'176);
  EXPECT_EQ(m->tensors.size(), 49u + 21);
  EXPECT_EQ(m->mtp_layers, 1);
  const auto* eh = find(*m, "model.layers.3.eh_proj.weight");
  ASSERT_NE(eh, nullptr);
  EXPECT_EQ(eh->spec.shape, (Shape{64, 128}));
  EXPECT_EQ(eh->section, Section::kHead);
  EXPECT_EQ(find(*m, "model.layers.3.mlp.experts.up_proj")->section, Section::kHead);
  EXPECT_EQ(m->num_layers, 3);
}

TEST(HfConfig, NullQLoraRankMeansPlainQProj) {
  auto j = nlohmann::json::parse(read_text("tiny-deepseek-v3.json"));
  j["q_lora_rank"] = nullptr;
  auto m = parse_hf_config(j.dump());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(shape_of(*m, "model.layers.0.self_attn.q_proj.weight"), (Shape{96, 64}));
  EXPECT_EQ(find(*m, "model.layers.0.self_attn.q_a_proj.weight"), nullptr);
}

// transformers' DeepseekV3Config defaults for the keys a config leaves out: first_k_dense_replace
// 3 (layers 0..2 dense, 3 MoE of 4), n_shared_experts 1 (shared [1 * 32, 64]), n_group 8.
TEST(HfConfig, DeepseekMissingMoeKeysTakeTransformersDefaults) {
  auto j = nlohmann::json::parse(read_text("tiny-deepseek-v3.json"));
  for (const auto* key : {"n_shared_experts", "first_k_dense_replace", "n_group", "moe_layer_freq"})
    j.erase(key);
  j["num_hidden_layers"] = 4;
  auto m = parse_hf_config(j.dump());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(shape_of(*m, "model.layers.2.mlp.gate_proj.weight"), (Shape{128, 64}));
  EXPECT_EQ(find(*m, "model.layers.2.mlp.gate.weight"), nullptr);
  EXPECT_EQ(shape_of(*m, "model.layers.3.mlp.shared_experts.gate_proj.weight"), (Shape{32, 64}));
  EXPECT_EQ(m->expert_groups, 8);
  // null means none: no shared experts, no MoE layers.
  j["n_shared_experts"] = nullptr;
  EXPECT_EQ(find(*parse_hf_config(j.dump()), "model.layers.3.mlp.shared_experts.gate_proj.weight"), nullptr);
  j["n_group"] = nullptr;
  EXPECT_EQ(parse_hf_config(j.dump())->expert_groups, 1);
  j["n_routed_experts"] = nullptr;
  EXPECT_EQ(parse_hf_config(j.dump())->num_experts, 0);
  // vLLM would compare layer indices with a null first_k_dense_replace: refused, naming it.
  j["n_routed_experts"] = 8;
  j["first_k_dense_replace"] = nullptr;
  const auto refused = parse_hf_config(j.dump());
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("first_k_dense_replace"), std::string::npos)
      << refused.error().message;
}

// vLLM's DeepseekV2MoE gives the router an fp32 e_score_correction_bias only for
// topk_method == "noaux_tc"; greedy routing (or null) has none, on either side.
TEST(HfConfig, RouterBiasOnlyForNoauxTcRouting) {
  auto j = nlohmann::json::parse(read_text("tiny-deepseek-v3.json"));
  const auto bias = "model.layers.1.mlp.gate.e_score_correction_bias";
  EXPECT_EQ(find(*parse_hf_config(j.dump()), bias)->spec.dtype, DType::kFP32);
  for (const nlohmann::json method : {nlohmann::json("greedy"), nlohmann::json(nullptr)}) {
    j["topk_method"] = method;
    auto m = parse_hf_config(j.dump());
    ASSERT_TRUE(m) << m.error().message;
    EXPECT_EQ(find(*m, bias), nullptr) << method.dump();
  }
}

TEST(HfConfig, KimiK2ModelTypeIsDeepseekV3) {
  auto j = nlohmann::json::parse(read_text("tiny-deepseek-v3.json"));
  j["model_type"] = "kimi_k2";
  auto m = parse_hf_config(j.dump());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_EQ(m->architecture, "deepseek_v3");
}

TEST(HfConfig, MoeLayerFrequencyAndMlpOnlyLayers) {
  // deepseek: layer i is MoE when i >= first_k_dense_replace and i % moe_layer_freq == 0.
  auto ds = nlohmann::json::parse(read_text("tiny-deepseek-v3.json"));
  ds["first_k_dense_replace"] = 0;
  ds["moe_layer_freq"] = 2;
  auto m = parse_hf_config(ds.dump());
  ASSERT_TRUE(m) << m.error().message;
  EXPECT_NE(find(*m, "model.layers.0.mlp.experts.gate_proj"), nullptr);
  EXPECT_NE(find(*m, "model.layers.1.mlp.gate_proj.weight"), nullptr);
  EXPECT_NE(find(*m, "model.layers.2.mlp.experts.gate_proj"), nullptr);
  // qwen3_moe: layers listed in mlp_only_layers are dense.
  auto qw = nlohmann::json::parse(read_text("tiny-qwen3-moe.json"));
  qw["mlp_only_layers"] = {1};
  auto q = parse_hf_config(qw.dump());
  ASSERT_TRUE(q) << q.error().message;
  EXPECT_NE(find(*q, "model.layers.0.mlp.experts.gate_proj"), nullptr);
  EXPECT_EQ(shape_of(*q, "model.layers.1.mlp.gate_proj.weight"), (Shape{128, 64}));
}

TEST(HfConfig, DtypeComesFromTorchDtypeOrTheOverride) {
  auto j = nlohmann::json::parse(read_text("tiny-llama.json"));
  j["torch_dtype"] = "float32";
  auto fp32 = parse_hf_config(j.dump());
  ASSERT_TRUE(fp32) << fp32.error().message;
  EXPECT_EQ(fp32->dtype, DType::kFP32);
  EXPECT_EQ(fp32->bytes().value, 4 * 106'816);
  j.erase("torch_dtype");
  EXPECT_EQ(testing::error_code(parse_hf_config(j.dump())), ErrorCode::kInvalidArgument);
  auto forced = parse_hf_config(j.dump(), HfOptions{.dtype = DType::kFP8E4M3});
  ASSERT_TRUE(forced) << forced.error().message;
  EXPECT_EQ(forced->bytes().value, 106'816);
}

TEST(HfConfig, AQuantizedCheckpointIsNotedNotActedOn) {
  // DeepSeek-V3's config ships fp8 in 128x128 blocks (quantization_config), which vLLM serves as
  // such: the weights stay in the config's dtype, and a note says what --quantize would move. A
  // config once read so said nothing, and a bf16 refit was predicted without a word.
  auto j = nlohmann::json::parse(read_text("tiny-deepseek-v3.json"));
  const auto plain = parse_hf_config(j.dump());
  ASSERT_TRUE(plain) << plain.error().message;
  EXPECT_TRUE(plain->notes.empty());
  j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  const auto fp8 = parse_hf_config(j.dump());
  ASSERT_TRUE(fp8) << fp8.error().message;
  EXPECT_EQ(fp8->bytes(), plain->bytes());
  ASSERT_EQ(fp8->notes.size(), 1u);
  EXPECT_NE(fp8->notes[0].find("--quantize fp8-block128 moves them so; planned in bf16 without it"),
            std::string::npos)
      << fp8->notes[0];
  j["quantization_config"] = {{"quant_method", "awq"}, {"weight_block_size", {0, 7}}};
  const auto other = parse_hf_config(j.dump());
  ASSERT_TRUE(other) << other.error().message;
  ASSERT_EQ(other->notes.size(), 1u);
  EXPECT_NE(other->notes[0].find("quant_method awq, weight_block_size [0,7]) is not modelled"),
            std::string::npos)
      << other->notes[0];
}

struct BadConfig {
  const char* file;
  const char* field;     // removed, or set to `value`
  nlohmann::json value;  // null: remove the field
  ErrorCode code;
  const char* must_mention;
};

class BadConfigs : public ::testing::TestWithParam<BadConfig> {};

TEST_P(BadConfigs, ErrorNamesTheField) {
  const auto& b = GetParam();
  auto j = nlohmann::json::parse(read_text(b.file));
  b.value.is_null() ? static_cast<void>(j.erase(b.field)) : static_cast<void>(j[b.field] = b.value);
  auto m = parse_hf_config(j.dump(), {}, "bad.json");
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, b.code) << m.error().message;
  EXPECT_NE(m.error().message.find(b.must_mention), std::string::npos) << m.error().message;
  EXPECT_NE(m.error().message.find("bad.json"), std::string::npos) << m.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadConfigs,
    ::testing::Values(
        BadConfig{"tiny-llama.json", "model_type", "gpt2", ErrorCode::kUnsupported,
                  "model_type: unknown architecture 'gpt2'"},
        BadConfig{"tiny-llama.json", "hidden_size", nullptr, ErrorCode::kInvalidArgument,
                  "hidden_size: missing"},
        BadConfig{"tiny-llama.json", "num_hidden_layers", "2", ErrorCode::kInvalidArgument,
                  "num_hidden_layers: expected an integer"},
        BadConfig{"tiny-llama.json", "vocab_size", 0, ErrorCode::kOutOfRange, "vocab_size: must be >= 1"},
        BadConfig{"tiny-llama.json", "hidden_size", 40'960'000'000, ErrorCode::kOutOfRange,
                  "hidden_size: must be <= 1048576"},
        BadConfig{"tiny-llama.json", "intermediate_size", nullptr, ErrorCode::kInvalidArgument,
                  "intermediate_size: missing"},
        BadConfig{"tiny-llama.json", "num_key_value_heads", 3, ErrorCode::kInvalidArgument,
                  "num_key_value_heads"},
        BadConfig{"tiny-llama.json", "torch_dtype", "float7", ErrorCode::kUnsupported, "torch_dtype"},
        BadConfig{"tiny-qwen3-moe.json", "moe_intermediate_size", nullptr, ErrorCode::kInvalidArgument,
                  "moe_intermediate_size"},
        BadConfig{"tiny-qwen3-moe.json", "mlp_only_layers", "x", ErrorCode::kInvalidArgument,
                  "mlp_only_layers"},
        BadConfig{"tiny-mixtral.json", "num_local_experts", nullptr, ErrorCode::kInvalidArgument,
                  "num_local_experts: missing"},
        BadConfig{"tiny-deepseek-v3.json", "q_lora_rank", nullptr, ErrorCode::kInvalidArgument,
                  "q_lora_rank: missing"},
        BadConfig{"tiny-deepseek-v3.json", "kv_lora_rank", nullptr, ErrorCode::kInvalidArgument,
                  "kv_lora_rank: missing"},
        BadConfig{"tiny-deepseek-v3.json", "attention_bias", true, ErrorCode::kUnsupported, "attention_bias"},
        BadConfig{"tiny-qwen3-moe.json", "num_experts", nullptr, ErrorCode::kInvalidArgument,
                  "num_experts: missing"},
        BadConfig{"tiny-deepseek-v3.json", "n_routed_experts", nullptr, ErrorCode::kInvalidArgument,
                  "n_routed_experts: missing (transformers would give 256 routed experts"},
        BadConfig{"tiny-deepseek-v3.json", "topk_method", nullptr, ErrorCode::kInvalidArgument,
                  "topk_method: missing (noaux_tc gives the router an e_score_correction_bias"}));

TEST(HfConfig, MtpOnAModelWithoutIt) {
  auto m = load_hf_config(data_path("tiny-llama.json"), HfOptions{.include_mtp = true});
  ASSERT_FALSE(m);
  EXPECT_EQ(m.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(m.error().message.find("num_nextn_predict_layers"), std::string::npos);
}

TEST(HfConfig, FileErrors) {
  auto missing = load_hf_config(data_path("no-such-config.json"));
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  auto garbage = parse_hf_config("{\"model_type\": ", {}, "cut.json");
  ASSERT_FALSE(garbage);
  EXPECT_EQ(garbage.error().code, ErrorCode::kParse);
  EXPECT_NE(garbage.error().message.find("cut.json: not valid JSON"), std::string::npos);
}

}  // namespace
}  // namespace refit::models
