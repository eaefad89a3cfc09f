// The PROBLEM options that plan, simulate and run share, parsed the way those commands parse them.
#include <filesystem>
#include <tuple>

#include <gtest/gtest.h>

#include "problem_options.h"
#include "refit/models/manifest.h"

namespace refit::cli {
namespace {

const std::string kTinyMoe = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-qwen3-moe.json";

// Parses `args` as a subcommand with the PROBLEM options and loads the problem.
[[nodiscard]] Result<ReshardProblem> load(std::vector<std::string> args) {
  CLI::App app;
  ProblemOptions options;
  add_problem_options(&app, options);
  std::reverse(args.begin(), args.end());  // CLI11 takes the arguments last first
  app.parse(args);
  return load_problem(options);
}

TEST(ProblemOptions, ModelWithTwoLayouts) {
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

TEST(ProblemOptions, BuiltinModelName) {
  auto p = load({"--model", "llama-3.1-8b", "--train", "tp=8", "--infer", "tp=4,dp=2"});
  ASSERT_TRUE(p) << p.error().message;
  EXPECT_EQ(p->total_bytes().value, 2 * 8'030'261'248);
}

TEST(ProblemOptions, Manifest) {
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

TEST(ProblemOptions, ManifestExcludesModel) {
  EXPECT_THROW(load({"--manifest", "m.json", "--model", "qwen3-8b"}), CLI::ExcludesError);
  ProblemOptions both;
  both.manifest = "m.json";
  both.train = "tp=2";
  auto p = load_problem(both);
  ASSERT_FALSE(p);
  EXPECT_EQ(p.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(p.error().message.find("either --manifest or --model"), std::string::npos);
}

TEST(ProblemOptions, ErrorsNameTheOption) {
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
       "--manifest: /nonexistent.json: cannot open"},
  };
  for (const auto& [args, code, message] : cases) {
    auto p = load(args);
    ASSERT_FALSE(p) << message;
    EXPECT_EQ(p.error().code, code) << p.error().message;
    EXPECT_NE(p.error().message.find(message), std::string::npos) << p.error().message;
  }
}

}  // namespace
}  // namespace refit::cli
