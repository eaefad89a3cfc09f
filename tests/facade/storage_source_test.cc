// A side's framework parameters from what a user names (load_storage: the models' rules, or a
// version 2 manifest), and a rank's buffers over parameter memory the caller holds
// (framework_rank_buffers, which FrameworkBuffers::allocate and the Python package share).
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "refit/executors/framework_buffers.h"
#include "refit/facade/problem_source.h"
#include "refit/models/manifest.h"

namespace refit {
namespace {

// tiny-llama-vocab1023: hidden 64, 4 heads over 2 query groups, vocab 1023; Megatron TP2 (ranks
// 0-1), vLLM TP4 (ranks 2-5).
const ProblemSource kLlama{.model = std::string(REFIT_TEST_DATA_DIR) + "/models/tiny-llama-vocab1023.json",
                           .train = "tp=2",
                           .infer = "tp=4"};

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()) + ".json");
}

TEST(LoadStorage, ModelRulesGiveEachSideItsFramework) {
  const auto problem = load_problem(kLlama).value();
  const auto megatron = load_storage(kLlama, problem, true);
  ASSERT_TRUE(megatron) << megatron.error().message;
  EXPECT_EQ(megatron->framework, "megatron");
  EXPECT_EQ(megatron->first_rank, 0);
  EXPECT_EQ(megatron->ranks.size(), 2u);
  const auto vllm = load_storage(kLlama, problem, false);
  ASSERT_TRUE(vllm) << vllm.error().message;
  EXPECT_EQ(vllm->framework, "vllm");
  EXPECT_EQ(vllm->first_rank, 2);
  ASSERT_EQ(vllm->ranks.size(), 4u);
  // vLLM pads the vocab to a multiple of 64: 1024 rows, 256 a rank.
  const auto& last = vllm->of(Rank{5}).parameters;
  const auto lm_head =
      std::ranges::find(last, std::string("lm_head.weight"), &models::FrameworkParameter::name);
  ASSERT_NE(lm_head, last.end());
  EXPECT_EQ(lm_head->shape, (Shape{256, 64}));
}

TEST(LoadStorage, VersionTwoManifestCarriesTheMapsAndVersionOneNamesWhatToWrite) {
  const auto problem = load_problem(kLlama).value();
  const models::StorageMaps maps{.source = load_storage(kLlama, problem, true).value(),
                                 .destination = load_storage(kLlama, problem, false).value()};
  const auto v2 = temp_file("refit_storage_v2");
  const auto v1 = temp_file("refit_storage_v1");
  ASSERT_TRUE(models::save_manifest(problem, v2, &maps));
  ASSERT_TRUE(models::save_manifest(problem, v1));
  const ProblemSource from_v2{.manifest = v2.string()};
  const ProblemSource from_v1{.manifest = v1.string()};
  const auto read = load_storage(from_v2, load_problem(from_v2).value(), false);
  const auto missing = load_storage(from_v1, load_problem(from_v1).value(), true);
  std::filesystem::remove(v2);
  std::filesystem::remove(v1);
  ASSERT_TRUE(read) << read.error().message;
  EXPECT_EQ(*read, maps.destination);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().code, ErrorCode::kInvalidArgument);
  EXPECT_EQ(missing.error().message.find("--manifest: " + v1.string() + " has no storage maps"), 0u)
      << missing.error().message;
}

// A bf16 version 2 manifest given --quantize: its regions indexed the manifest's tensors while the
// problem had scale tensors inserted after each weight, so they pointed at the wrong tensors and
// refit run segfaulted filling the pattern. Now they follow their tensors by name and the check
// refuses what no longer fits (bf16 parameters for fp8 weights, no parameters for the scales),
// saying how to write a manifest that does; and --quantize on weights already quantized is
// refused instead of ignored.
TEST(LoadStorage, AManifestsMapsUnderQuantizeFollowTheirTensorsAndAreCheckedAgain) {
  const ProblemSource blocks{.model = std::string(REFIT_TEST_DATA_DIR) + "/models/small-llama-blocks.json",
                             .train = "tp=2",
                             .infer = "tp=2,dp=2"};
  const auto problem = load_problem(blocks).value();
  const models::StorageMaps maps{.source = load_storage(blocks, problem, true).value(),
                                 .destination = load_storage(blocks, problem, false).value()};
  const auto path = temp_file("refit_storage_quantize");
  ASSERT_TRUE(models::save_manifest(problem, path, &maps));
  for (const char* site : {"training", "sender", "receiver"}) {
    SCOPED_TRACE(site);
    const ProblemSource quantized{.model_options = {.quantize = "fp8-block128", .quantize_at = site},
                                  .manifest = path.string()};
    const auto q = load_problem(quantized).value();
    for (const bool training : {true, false}) {
      const auto side = load_storage(quantized, q, training);
      if (side) continue;  // a side whose tensors --quantize leaves as they were
      EXPECT_EQ(side.error().code, ErrorCode::kMismatch);
      EXPECT_EQ(side.error().message.find(
                    "--quantize fp8-block128: the manifest's storage maps hold its tensors as "
                    "written"),
                0u)
          << side.error().message;
    }
    // Quantized before vLLM, its side holds fp8 weights and scales; at the receiver, bf16 as written.
    EXPECT_EQ(load_storage(quantized, q, false).has_value(), std::string(site) == "receiver");
  }
  // A manifest whose weights are quantized already: --quantize again is refused.
  const ProblemSource trained{.model_options = {.quantize = "fp8-block128", .quantize_at = "training"},
                              .manifest = path.string()};
  const auto fp8 = temp_file("refit_storage_fp8");
  ASSERT_TRUE(models::save_manifest(load_problem(trained).value(), fp8));
  const auto again =
      load_problem(ProblemSource{.model_options = {.quantize = "fp8-block128"}, .manifest = fp8.string()});
  std::filesystem::remove(path);
  std::filesystem::remove(fp8);
  ASSERT_FALSE(again);
  EXPECT_NE(
      again.error().message.find("--quantize: 'model.layers.0.self_attn.q_proj.weight' is quantized already"),
      std::string::npos)
      << again.error().message;
}

// Heap memory for every parameter of `rank`, as FrameworkBuffers would allocate it.
std::vector<std::vector<std::byte>> memory_for(const models::RankStorage& storage) {
  std::vector<std::vector<std::byte>> out;
  for (const auto& p : storage.parameters)
    out.emplace_back(static_cast<std::size_t>(p.elements() * dtype_size(p.dtype)));
  return out;
}

std::vector<std::span<std::byte>> spans_of(std::vector<std::vector<std::byte>>& memory) {
  return {memory.begin(), memory.end()};
}

TEST(FrameworkRankBuffers, CallersMemoryGetsTheShardsAndRegionsThatAllocateGives) {
  const auto problem = load_problem(kLlama).value();
  const auto heap = [](Bytes bytes) -> Result<std::unique_ptr<HostAllocation>> {
    return heap_allocation(bytes);
  };
  for (const bool training : {true, false}) {
    const auto side = load_storage(kLlama, problem, training).value();
    for (std::int32_t r = side.first_rank; r < side.first_rank + std::ssize(side.ranks); ++r) {
      const auto allocated = FrameworkBuffers::allocate(problem, side, Rank{r}, heap).value();
      auto memory = memory_for(side.of(Rank{r}));
      const auto given = framework_rank_buffers(problem, side, Rank{r}, spans_of(memory));
      ASSERT_TRUE(given) << given.error().message;
      const auto& want = training ? allocated.buffers().sources : allocated.buffers().destinations;
      const auto& got = training ? given->sources : given->destinations;
      ASSERT_EQ(got.size(), want.size()) << "rank " << r;
      for (std::size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].tensor, want[i].tensor);
        EXPECT_EQ(got[i].box, want[i].box);
        EXPECT_EQ(got[i].regions, want[i].regions);
        EXPECT_TRUE(got[i].bytes.empty());
      }
      const auto& parameters = training ? given->source_parameters : given->destination_parameters;
      ASSERT_EQ(parameters.size(), memory.size());
      for (std::size_t i = 0; i < memory.size(); ++i) EXPECT_EQ(parameters[i].data(), memory[i].data());
      EXPECT_TRUE((training ? given->destinations : given->sources).empty());
    }
  }
}

TEST(FrameworkRankBuffers, MemoryOfTheWrongSizeNamesTheParameter) {
  const auto problem = load_problem(kLlama).value();
  const auto side = load_storage(kLlama, problem, false).value();
  const auto& parameters = side.of(Rank{5}).parameters;
  auto memory = memory_for(side.of(Rank{5}));
  const auto lm_head = static_cast<std::size_t>(
      std::ranges::find(parameters, std::string("lm_head.weight"), &models::FrameworkParameter::name) -
      parameters.begin());
  memory[lm_head].resize(memory[lm_head].size() - 2);  // 256 x 64 bf16 = 32768 bytes, two short
  const auto short_one = framework_rank_buffers(problem, side, Rank{5}, spans_of(memory));
  ASSERT_FALSE(short_one);
  EXPECT_EQ(short_one.error().code, ErrorCode::kMismatch);
  EXPECT_EQ(short_one.error().message,
            "rank 5: vllm parameter 'lm_head.weight' is 32768 bytes, its buffer holds 32766");

  auto fewer = spans_of(memory);
  fewer.pop_back();
  const auto missing = framework_rank_buffers(problem, side, Rank{5}, fewer);
  ASSERT_FALSE(missing);
  EXPECT_EQ(missing.error().message, "rank 5: " + std::to_string(fewer.size()) +
                                         " parameter buffers for the " + std::to_string(parameters.size()) +
                                         " vllm parameters of the rank");

  const auto other_side = framework_rank_buffers(problem, side, Rank{1}, spans_of(memory));
  ASSERT_FALSE(other_side);
  EXPECT_EQ(other_side.error().code, ErrorCode::kOutOfRange);
  EXPECT_EQ(other_side.error().message, "rank 1 is not one of the 4 ranks of the vllm storage map");
}

}  // namespace
}  // namespace refit
