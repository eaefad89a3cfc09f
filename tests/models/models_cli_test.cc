#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

const std::string kTinyMoe = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json";

TEST(ModelsCli, ListsTheBuiltinsAsJson) {
  const auto r = run_refit("models --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["models"].size(), 8u);
  const auto& first = j["models"][0];
  EXPECT_EQ(first["name"], "qwen3-235b-a22b");
  EXPECT_EQ(first["architecture"], "qwen3_moe");
  EXPECT_EQ(first["params"], 235'093'634'560);      // a plain integer
  EXPECT_EQ(first["bf16_bytes"], 470'187'269'120);  // 2 bytes per parameter
}

TEST(ModelsCli, ListsTheBuiltinsAsATable) {
  const auto r = run_refit("models");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("kimi-k2"), std::string::npos);
  EXPECT_NE(r.out.find("1026408232448"), std::string::npos);
}

TEST(ModelsCli, ShowsAModelWithLayouts) {
  // Qwen3-235B TP4xPP8xEP16 (ETP1) -> 16 engines of TP8: the per-rank bytes of models/problem_test.cc.
  const auto r =
      run_refit("models qwen3-235b-a22b --train tp=4,pp=8,ep=16,etp=1 --infer tp=8,engines=16 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["params"], 235'093'634'560);
  EXPECT_NEAR(j["projection_share"].get<double>(), 0.966, 0.0005);
  EXPECT_EQ(j["train"], "tp=4,pp=8,ep=16,etp=1,cp=1,dp=4");
  EXPECT_EQ(j["source_ranks"], 128);
  EXPECT_EQ(j["destination_ranks"], 128);
  ASSERT_EQ(j["training_rank_bytes"].size(), 128u);
  EXPECT_EQ(j["training_rank_bytes"][0], 4'375'910'400);
  EXPECT_EQ(j["training_rank_bytes"][127], 3'697'456'128);
  EXPECT_EQ(j["inference_rank_bytes"][5], 58'959'617'024);
}

TEST(ModelsCli, HumanOutputForAConfigFile) {
  const auto r = run_refit("models " + kTinyMoe + " --train tp=2,pp=2 --infer tp=4");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("params          157056"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("training rank"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("gate/up/down"), std::string::npos) << r.out;
}

TEST(ModelsCli, WritesAManifest) {
  const auto path =
      std::filesystem::temp_directory_path() / ("refit_models_cli_" + std::to_string(::getpid()) + ".json");
  const auto r = run_refit("models " + kTinyMoe + " --train tp=2,ep=2,etp=1 --infer tp=2,dp=2,ep=on " +
                           "--per-expert --write-manifest " + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::filesystem::remove(path);
  const auto j = nlohmann::json::parse(text.str());
  EXPECT_EQ(j["format"], "refit-manifest");
  EXPECT_EQ(j["source_ranks"], 2);
  EXPECT_EQ(j["destination_ranks"], 4);
  // 27 stacked tensors; per expert: 2 layers * 3 * (8 - 1) more.
  EXPECT_EQ(j["tensors"].size(), 27u + 42);
}

// --storage: each side's parameters on every rank with the regions of the logical tensors in
// them. tiny-qwen3-moe, vLLM tp=2: per layer qkv_proj [64/2 + 32/2 + 32/2 = 64, 64], w13
// [8, 2*32/2, 64] holding gate and up of every expert (2 regions), w2 [8, 64, 16].
TEST(ModelsCli, StorageListsEachRanksParametersWithTheirRegions) {
  const auto r = run_refit("models " + kTinyMoe + " --train tp=1 --infer tp=2 --storage --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["storage"]["training"]["framework"], "megatron");
  const auto& rank = j["storage"]["inference"]["ranks"][1];
  EXPECT_EQ(rank["rank"], 2);
  std::map<std::string, nlohmann::json> shapes;
  for (const auto& p : rank["parameters"]) shapes[p["name"]] = p["shape"];
  EXPECT_EQ(shapes["model.layers.0.self_attn.qkv_proj.weight"], nlohmann::json::parse("[64, 64]"));
  EXPECT_EQ(shapes["model.layers.1.mlp.experts.w13_weight"], nlohmann::json::parse("[8, 32, 64]"));
  EXPECT_EQ(shapes["model.layers.1.mlp.experts.w2_weight"], nlohmann::json::parse("[8, 64, 16]"));
  const auto regions = std::ranges::count_if(rank["regions"], [](const auto& g) {
    return g["tensor"].template get<std::string>().starts_with("model.layers.1.mlp.experts.");
  });
  EXPECT_EQ(regions, 3);
}

struct BadInput {
  std::string args;
  const char* must_mention;
  friend void PrintTo(const BadInput& b, std::ostream* os) { *os << b.args; }
};

class ModelsCliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(ModelsCliBadInput, ExitsTwoNamingTheField) {
  const auto r = run_refit(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(GetParam().must_mention), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, ModelsCliBadInput,
    ::testing::Values(
        BadInput{"models gpt-5", "unknown model 'gpt-5'"},
        BadInput{"models /nonexistent/config.json", "no such file"},
        BadInput{"models qwen3-8b --train tp=4", "--infer: missing"},
        BadInput{"models qwen3-8b --train tp=4,zz=2 --infer tp=8", "--train: unknown key 'zz'"},
        BadInput{"models qwen3-8b --train tp=3 --infer tp=8", "tp=3 does not divide num_attention_heads=32"},
        BadInput{"models qwen3-235b-a22b --train ep=256 --infer tp=8",
                 "ep=256 does not divide the routed experts=128"},
        BadInput{"models qwen3-235b-a22b --train ep=16 --infer tp=8,dp=3,ep=on",
                 "does not divide the 128 routed experts"},
        BadInput{"models qwen3-8b --dtype float7", "--dtype"},
        BadInput{"models --train tp=2", "need a MODEL"},
        BadInput{"models " + std::string(REFIT_TEST_DATA_DIR) + "/models/bad-architecture.json",
                 "model_type: unknown architecture 'gpt2'"},
        BadInput{"models " + std::string(REFIT_TEST_DATA_DIR) + "/models/bad-missing-field.json",
                 "num_attention_heads: missing"}));

// A requested round_robin that vLLM would not keep is laid out linearly, as vLLM loads it, and
// said: tiny-deepseek-v3-groups has 8 experts in n_group = 2 groups, tiny-qwen3-moe none.
TEST(ModelsCli, RoundRobinIsKeptWhereVllmKeepsItAndANoteSaysWhereNot) {
  const std::string groups = "models " + std::string(REFIT_TEST_DATA_DIR) +
                             "/models/tiny-deepseek-v3-groups.json --per-expert --train tp=1 ";
  const auto kept = run_refit(groups + "--infer tp=2,ep=on,placement=round_robin --json");
  ASSERT_EQ(kept.exit_code, 0) << kept.err;
  EXPECT_EQ(kept.err.find("note"), std::string::npos) << kept.err;
  EXPECT_NE(kept.out.find("placement=round_robin"), std::string::npos);
  // dp=2 makes vLLM's MoE layers all-to-all: round_robin only on deepep_low_latency or nixl_ep.
  const auto all2all = run_refit(groups + "--infer tp=1,dp=2,ep=on,placement=round_robin --json");
  ASSERT_EQ(all2all.exit_code, 0) << all2all.err;
  EXPECT_NE(all2all.err.find(
                "refit models: note: placement=round_robin: vLLM falls back to linear expert placement"),
            std::string::npos)
      << all2all.err;
  EXPECT_EQ(all2all.out.find("placement=round_robin"), std::string::npos) << all2all.out;
  const auto deepep =
      run_refit(groups + "--infer tp=1,dp=2,ep=on,placement=round_robin,all2all=deepep_low_latency");
  ASSERT_EQ(deepep.exit_code, 0) << deepep.err;
  EXPECT_EQ(deepep.err.find("note"), std::string::npos) << deepep.err;
  const auto qwen =
      run_refit("models " + kTinyMoe + " --per-expert --train tp=1 --infer tp=2,ep=on,placement=round_robin");
  ASSERT_EQ(qwen.exit_code, 0) << qwen.err;
  EXPECT_NE(qwen.err.find("several expert groups (n_group > 1)"), std::string::npos) << qwen.err;
}

// A config whose checkpoint ships fp8 (quantization_config, as DeepSeek-V3's does) is read in its
// dtype, with a note that --quantize moves it as vLLM serves it; none once --quantize is given.
TEST(ModelsCli, AQuantizedCheckpointIsNotedUntilQuantizeIsGiven) {
  auto j = nlohmann::json::parse(std::ifstream(std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-llama.json"));
  j["quantization_config"] = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}};
  const auto path = std::filesystem::temp_directory_path() /
                    ("refit_models_cli_fp8_" + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << j.dump();
  const auto noted =
      run_refit("plan --model " + path.string() + " --train tp=1 --infer tp=1 --cluster cpu-host");
  const auto told = run_refit("plan --model " + path.string() +
                              " --train tp=1 --infer tp=1 --cluster cpu-host --quantize mxfp8");
  std::filesystem::remove(path);
  ASSERT_EQ(noted.exit_code, 0) << noted.err;
  EXPECT_NE(noted.err.find("quantization_config ships the weights in fp8 with 128x128 blocks, as vLLM serves "
                           "them: --quantize fp8-block128 moves them so; planned in bf16 without it"),
            std::string::npos)
      << noted.err;
  ASSERT_EQ(told.exit_code, 0) << told.err;
  EXPECT_EQ(told.err.find("quantization_config"), std::string::npos) << told.err;
}

}  // namespace
}  // namespace refit
