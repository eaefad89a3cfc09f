#include <filesystem>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "error_code.h"

#include "refit/models/hf_config.h"
#include "refit/models/manifest.h"
#include "refit/models/problem_builder.h"

namespace refit::models {
namespace {

void expect_same(const ReshardProblem& a, const ReshardProblem& b) {
  EXPECT_EQ(a.source_ranks(), b.source_ranks());
  EXPECT_EQ(a.destination_ranks(), b.destination_ranks());
  ASSERT_EQ(a.tensors().size(), b.tensors().size());
  for (std::size_t i = 0; i < a.tensors().size(); ++i) {
    EXPECT_EQ(a.tensors()[i].tensor, b.tensors()[i].tensor);
    EXPECT_EQ(a.tensors()[i].source, b.tensors()[i].source) << a.tensors()[i].tensor.name;
    EXPECT_EQ(a.tensors()[i].destination, b.tensors()[i].destination) << a.tensors()[i].tensor.name;
  }
}

struct RoundTrip {
  const char* file;
  const char* train;
  const char* infer;
  HfOptions options;
};

class ConfigRoundTrip : public ::testing::TestWithParam<RoundTrip> {};

// Per architecture: config.json -> tensors -> Megatron and vLLM layouts -> manifest -> the same
// problem, through a file.
TEST_P(ConfigRoundTrip, ConfigToManifestAndBack) {
  const auto& rt = GetParam();
  auto model = load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/" + rt.file, rt.options);
  ASSERT_TRUE(model) << model.error().message;
  auto problem = build_problem(*model, *parse_megatron(rt.train), *parse_vllm(rt.infer));
  ASSERT_TRUE(problem) << problem.error().message;
  EXPECT_EQ(problem->total_bytes(), model->bytes());
  const auto path = std::filesystem::temp_directory_path() /
                    (std::string("refit_manifest_") + std::to_string(::getpid()) + ".json");
  ASSERT_TRUE(save_manifest(*problem, path));
  auto back = load_manifest(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(back) << back.error().message;
  expect_same(*problem, *back);
  EXPECT_EQ(write_manifest(*back), write_manifest(*problem));
}

INSTANTIATE_TEST_SUITE_P(
    Architectures, ConfigRoundTrip,
    ::testing::Values(
        RoundTrip{"tiny-llama.json", "tp=2,pp=2", "tp=4", {}},
        RoundTrip{"tiny-qwen2.json", "tp=2,pp=2,dp=2", "tp=2,dp=2", {}},
        RoundTrip{"tiny-qwen3.json", "tp=2,cp=2", "tp=4,dp=2", {}},
        RoundTrip{"tiny-qwen3-moe.json", "tp=2,pp=2,ep=4", "tp=4,dp=2", {}},
        RoundTrip{"tiny-qwen3-moe.json", "ep=2,etp=2,dp=4", "tp=2,dp=2,ep=on", HfOptions{.per_expert = true}},
        RoundTrip{"tiny-mixtral.json", "tp=2,ep=2,etp=1", "tp=2,dp=2,ep=on", {}},
        RoundTrip{"tiny-deepseek-v3.json", "pp=2,ep=4", "tp=4", HfOptions{.include_mtp = true}}));

constexpr const char* kExample = R"({
  "format": "refit-manifest", "version": 1, "source_ranks": 2, "destination_ranks": 2,
  "tensors": [
    {"name": "w", "shape": [8, 4], "dtype": "bf16",
     "source": {"mesh": [2], "ranks": [0, 1], "placements": ["S0"]},
     "destination": {"mesh": [2], "placements": ["S1"]}}
  ]})";

TEST(Manifest, ReadsTheReadmeExampleWithDefaultRanks) {
  auto p = parse_manifest(kExample);
  ASSERT_TRUE(p) << p.error().message;
  ASSERT_EQ(p->tensors().size(), 1u);
  const auto& t = p->tensors()[0];
  EXPECT_EQ(t.tensor.shape, (Shape{8, 4}));
  EXPECT_EQ(t.tensor.dtype, DType::kBF16);
  // Destination ranks left out: source_ranks.. = 2, 3.
  EXPECT_EQ(t.destination.mesh().ranks(), (std::vector<Rank>{Rank{2}, Rank{3}}));
  EXPECT_EQ(*t.destination.local_box(Rank{3}), (Box{{0, 2}, {8, 2}}));
  EXPECT_EQ(p->total_bytes().value, 8 * 4 * 2);
}

TEST(Manifest, ReadsTheReadmeExample) {
  // Training ranks 0..3: 2 DP replicas (R) of a TP 2 split of the 128 columns (S1);
  // inference ranks 4, 5 split the 64 rows. Rank 1 holds columns 64..127, rank 5 rows 32..63.
  auto p = parse_manifest(R"({"format": "refit-manifest", "version": 1, "source_ranks": 4,
    "destination_ranks": 2, "tensors": [
    {"name": "model.layers.0.mlp.down_proj.weight", "shape": [64, 128], "dtype": "bf16",
     "source": {"mesh": [2, 2], "ranks": [0, 1, 2, 3], "placements": ["R", "S1"]},
     "destination": {"mesh": [2], "ranks": [4, 5], "placements": ["S0"]}}]})");
  ASSERT_TRUE(p) << p.error().message;
  const auto& t = p->tensors()[0];
  EXPECT_EQ(*t.source.local_box(Rank{1}), (Box{{0, 64}, {64, 64}}));
  EXPECT_EQ(*t.destination.local_box(Rank{5}), (Box{{32, 0}, {32, 128}}));
}

struct BadManifest {
  const char* json_pointer;  // where to change the example
  nlohmann::json value;      // null: remove it
  ErrorCode code;
  const char* must_mention;
};

class BadManifests : public ::testing::TestWithParam<BadManifest> {};

TEST_P(BadManifests, ErrorCarriesTheJsonPath) {
  const auto& b = GetParam();
  auto j = nlohmann::json::parse(kExample);
  const nlohmann::json::json_pointer at(b.json_pointer);
  if (b.value.is_null()) {
    j[at.parent_pointer()].erase(at.back());
  } else {
    j[at] = b.value;
  }
  auto p = parse_manifest(j.dump());
  ASSERT_FALSE(p) << j.dump();
  EXPECT_EQ(p.error().code, b.code) << p.error().message;
  EXPECT_NE(p.error().message.find(b.must_mention), std::string::npos) << p.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, BadManifests,
    ::testing::Values(
        BadManifest{"/format", "other", ErrorCode::kInvalidArgument, "format: expected \"refit-manifest\""},
        BadManifest{"/version", 3, ErrorCode::kUnsupported, "version: only versions 1 and 2"},
        BadManifest{"/source_ranks", nullptr, ErrorCode::kInvalidArgument, "source_ranks: missing"},
        BadManifest{"/tensors/0/name", nullptr, ErrorCode::kInvalidArgument, "tensors[0].name: missing"},
        BadManifest{"/tensors/0/dtype", "bf17", ErrorCode::kUnsupported, "tensors[0].dtype"},
        BadManifest{"/tensors/0/shape/1", -4, ErrorCode::kOutOfRange, "tensors[0].shape[1]: must be >= 0"},
        BadManifest{"/tensors/0/shape",
                    {1 << 30, 1 << 30},
                    ErrorCode::kOutOfRange,
                    "tensors[0].shape: elements: product"},
        BadManifest{"/tensors/0/source/mesh/0", 0, ErrorCode::kOutOfRange,
                    "tensors[0].source.mesh[0]: must be >= 1"},
        BadManifest{"/tensors/0/source/ranks",
                    {0, 0},
                    ErrorCode::kInvalidArgument,
                    "tensors[0].source: ranks[1]: rank 0 appears twice"},
        BadManifest{"/tensors/0/source/ranks",
                    {0, 1, 2},
                    ErrorCode::kMismatch,
                    "tensors[0].source: ranks: 3 ranks given for a mesh of 2 positions"},
        // Once read as "no ranks given": the side's ranks in order, which the writer never said.
        BadManifest{"/tensors/0/source/ranks", nlohmann::json::array(), ErrorCode::kMismatch,
                    "tensors[0].source.ranks: 0 ranks given for a mesh of 2 positions"},
        BadManifest{"/tensors/0/source/placements/0", "S7", ErrorCode::kOutOfRange,
                    "tensors[0].source: placements[0]: S7"},
        BadManifest{"/tensors/0/destination/placements/0", "Q", ErrorCode::kParse,
                    "tensors[0].destination.placements[0]"},
        BadManifest{"/tensors/0/destination/placements/0", 3, ErrorCode::kInvalidArgument,
                    "tensors[0].destination.placements[0]"},
        BadManifest{"/tensors/0/destination", nullptr, ErrorCode::kInvalidArgument,
                    "tensors[0].destination: missing"},
        BadManifest{"/tensors/0/source/ranks",
                    {2, 3},
                    ErrorCode::kOutOfRange,
                    "tensor 'w': source mesh uses rank 2"}));

TEST(Manifest, NotJsonOrMissingFile) {
  auto p = parse_manifest("[1, 2]");
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("expected a JSON object"), std::string::npos);
  auto missing = load_manifest("/nonexistent/manifest.json");
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
}

}  // namespace
}  // namespace refit::models

namespace refit::models {
namespace {

constexpr const char* kQuantized = R"({
  "format": "refit-manifest", "version": 1, "source_ranks": 2, "destination_ranks": 2,
  "tensors": [
    {"name": "w", "shape": [256, 512], "dtype": "fp8_e4m3",
     "quantization": {"scheme": "fp8-block128", "site": "sender", "from": "bf16"},
     "source": {"mesh": [2], "placements": ["S0"]},
     "destination": {"mesh": [2], "placements": ["S1"]}},
    {"name": "w_scale_inv", "shape": [2, 4], "dtype": "fp32",
     "quantization": {"scheme": "fp8-block128", "scales_of": "w"},
     "source": {"mesh": [2], "placements": ["S0:1"]},
     "destination": {"mesh": [2], "placements": ["S1:2"]}}
  ]})";

TEST(Manifest, QuantizedWeightsRoundTrip) {
  // A 256x512 weight quantized at the sender: rows split 128/128 on the training side (block
  // rows 0 | 1), columns 256/256 on the inference side (block columns 0-1 | 2-3).
  const auto p = parse_manifest(kQuantized);
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->tensors()[1].tensor.quantization->scales_of, "w");
  const auto back = parse_manifest(write_manifest(*p));
  ASSERT_TRUE(back) << back.error().message;
  expect_same(*p, *back);
}

TEST(Manifest, QuantizedScalesThatDoNotFollowTheirWeightAreRefused) {
  // The scales split by columns on the training side while the weight splits by rows.
  std::string text = kQuantized;
  text.replace(text.find(R"(["S0:1"])"), 8, R"(["S1:2"])");
  const auto p = parse_manifest(text);
  ASSERT_FALSE(p);
  EXPECT_NE(p.error().message.find("tensor 'w_scale_inv'"), std::string::npos) << p.error().message;
}

}  // namespace
}  // namespace refit::models
