// Hostile config.json and manifest inputs (issue 18): refused as bad input naming the field or
// tensor, before gigabytes are allocated or a size overflows.
#include <fstream>
#include <sstream>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/models/hf_config.h"
#include "refit/models/manifest.h"

namespace refit::models {
namespace {

using refit::testing::error_code;
using ::testing::HasSubstr;

// `json` with the value of `key` (a number or a string) set to `value`.
std::string with(std::string json, const std::string& key, const std::string& value) {
  const auto at = json.find("\"" + key + "\"");
  const auto end = json.find_first_of(",}", at);
  return json.substr(0, at) + "\"" + key + "\": " + value + json.substr(end);
}

// tests/data/models/tiny-qwen3-moe.json with `key` set to `value`.
std::string tiny_moe_with(const std::string& key, const std::string& value) {
  std::ifstream in(std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json");
  std::stringstream text;
  text << in.rdbuf();
  return with(text.str(), key, value);
}

TEST(HostileConfig, TheTemplateIsAModel) { EXPECT_TRUE(parse_hf_config(tiny_moe_with("num_experts", "8"))); }

TEST(HostileConfig, TensorCountIsCappedBeforeTensorsAreMade) {
  // 2^20 layers x (3 x 2^20 experts) would be 3.3e12 tensors, one per expert.
  const auto text = with(tiny_moe_with("num_experts", "1048576"), "num_hidden_layers", "1048576");
  const auto m = parse_hf_config(text, HfOptions{.per_expert = true});
  EXPECT_EQ(error_code(m), ErrorCode::kOutOfRange);
  EXPECT_THAT(m.error().message, HasSubstr("tensors per layer"));
}

TEST(HostileConfig, StackedExpertsBeyondTheElementCapNameTheTensor) {
  // [2^20 experts, 2^20, 2^20] = 2^60 elements > 2^48.
  auto text = with(tiny_moe_with("num_experts", "1048576"), "moe_intermediate_size", "1048576");
  text = with(text, "hidden_size", "1048576");
  const auto m = parse_hf_config(text);
  EXPECT_EQ(error_code(m), ErrorCode::kOutOfRange);
  EXPECT_THAT(m.error().message, HasSubstr("tensor 'model.layers.0.mlp.experts."));
  EXPECT_THAT(m.error().message, HasSubstr("elements"));
}

TEST(HostileConfig, NumbersBeyondDoubleRangeAndDuplicateKeys) {
  EXPECT_EQ(error_code(parse_hf_config(tiny_moe_with("hidden_size", "1e309"))), ErrorCode::kParse);
  const auto m = parse_hf_config(tiny_moe_with("hidden_size", R"(64, "hidden_size": 128)"));
  EXPECT_EQ(error_code(m), ErrorCode::kInvalidArgument);
  EXPECT_THAT(m.error().message, HasSubstr("hidden_size: key appears twice"));
}

std::string manifest_with(const std::string& shape, const std::string& mesh) {
  return R"({"format": "refit-manifest", "version": 1, "source_ranks": 2, "destination_ranks": 2,
    "tensors": [{"name": "w", "shape": )" +
         shape + R"(, "dtype": "bf16", "source": {"mesh": )" + mesh +
         R"(, "placements": ["S0"]}, "destination": {"mesh": [2], "placements": ["S1"]}}]})";
}

TEST(HostileManifest, MeshProductsCannotWrap) {
  // 2 x 2^62 wrapped to a negative size and passed the old check.
  const auto p = parse_manifest(manifest_with("[8, 4]", "[2, 4611686018427387904]"));
  EXPECT_EQ(error_code(p), ErrorCode::kOutOfRange);
  EXPECT_THAT(p.error().message, HasSubstr("tensors[0].source.mesh"));
}

TEST(HostileManifest, ShapesAreCappedInElements) {
  const auto p = parse_manifest(manifest_with("[1099511627776, 1099511627776]", "[2]"));
  EXPECT_EQ(error_code(p), ErrorCode::kOutOfRange);
  EXPECT_THAT(p.error().message, HasSubstr("tensors[0].shape: elements"));
}

}  // namespace
}  // namespace refit::models
