// Loading a problem from what a user names (the facade's load_problem, behind the PROBLEM
// options of plan, simulate and run): each case is written as the command-line options.
#include <filesystem>
#include <tuple>

#include <gtest/gtest.h>

#include "refit/facade/problem_source.h"
#include "refit/models/manifest.h"

namespace refit {
namespace {

const std::string kTinyMoe = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json";

// The source the PROBLEM options `args` describe, loaded.
[[nodiscard]] Result<ReshardProblem> load(const std::vector<std::string>& args) {
  ProblemSource s;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const auto& flag = args[i];
    if (flag == "--per-expert") {
      s.model_options.per_expert = true;
      continue;
    }
    if (flag == "--mtp") {
      s.model_options.mtp = true;
      continue;
    }
    const auto& value = args.at(++i);
    if (flag == "--model") s.model = value;
    if (flag == "--train") s.train = value;
    if (flag == "--infer") s.infer = value;
    if (flag == "--dtype") s.model_options.dtype = value;
    if (flag == "--manifest") s.manifest = value;
  }
  return load_problem(s);
}

TEST(ProblemSource, ModelWithTwoLayouts) {
  // tp=2, pp=2 -> 4 training ranks; vLLM tp=4 -> 4 inference ranks (4..7).
  auto p = load({"--model", kTinyMoe, "--train", "tp=2,pp=2", "--infer", "tp=4"});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->source_ranks(), 4);
  EXPECT_EQ(p->destination_ranks(), 4);
  EXPECT_EQ(p->tensors().size(), 27u);
  auto fp32 =
      load({"--model", kTinyMoe, "--train", "tp=2", "--infer", "tp=2", "--dtype", "fp32", "--per-expert"});
  ASSERT_TRUE(fp32) << fp32.error().message;
  EXPECT_EQ(fp32->total_bytes().value, 4 * 157'056);  // tiny-qwen3-moe parameters, 4 bytes each
  EXPECT_EQ(fp32->tensors().size(), 27u + 42);
}

TEST(ProblemSource, BuiltinModelName) {
  auto p = load({"--model", "llama-3.1-8b", "--train", "tp=8", "--infer", "tp=4,dp=2"});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->total_bytes().value, 2 * 8'030'261'248);
}

TEST(ProblemSource, Manifest) {
  auto built = load({"--model", kTinyMoe, "--train", "ep=2", "--infer", "tp=2"});
  ASSERT_TRUE(built) << built.error().message;
  const auto path = std::filesystem::temp_directory_path() /
                    ("refit_problem_options_" + std::to_string(::getpid()) + ".json");
  ASSERT_TRUE(models::save_manifest(*built, path));
  auto read = load({"--manifest", path.string()});
  std::filesystem::remove(path);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(read->total_bytes(), built->total_bytes());
  EXPECT_EQ(read->source_ranks(), 2);
}

TEST(ProblemSource, ManifestExcludesModel) {
  ProblemSource both;
  both.manifest = "m.json";
  both.train = "tp=2";
  auto p = load_problem(both);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("either --manifest or --model"), std::string::npos);
}

TEST(ProblemSource, ErrorsNameTheOption) {
  const std::tuple<std::vector<std::string>, ErrorCode, const char*> cases[] = {
      {{}, ErrorCode::kInvalidArgument, "--model: missing"},
      {{"--model", "qwen3-8b", "--infer", "tp=8"}, ErrorCode::kInvalidArgument, "--train: missing"},
      {{"--model", "qwen3-8b", "--train", "tp=8"}, ErrorCode::kInvalidArgument, "--infer: missing"},
      {{"--model", "qwen3-9b", "--train", "tp=8", "--infer", "tp=8"},
       ErrorCode::kNotFound,
       "--model: unknown model"},
      {{"--model", "qwen3-8b", "--train", "tp=8", "--infer", "tq=8"},
       ErrorCode::kNotFound,
       "--infer: unknown key 'tq'"},
      {{"--model", "qwen3-8b", "--dtype", "fp4", "--train", "tp=8", "--infer", "tp=8"},
       ErrorCode::kUnsupported,
       "--model: --dtype: unknown dtype 'fp4'"},
      {{"--manifest", "/nonexistent.json"},
       ErrorCode::kNotFound,
       "--manifest: /nonexistent.json: no such file"},
  };
  for (const auto& [args, code, message] : cases) {
    auto p = load(args);
    ASSERT_FALSE(p) << message;
    EXPECT_EQ(p.error().code, code) << p.error().message;
    EXPECT_NE(p.error().message.find(message), std::string::npos) << p.error().message;
  }
}

}  // namespace
}  // namespace refit
