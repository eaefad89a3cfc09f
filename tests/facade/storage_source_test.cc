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
