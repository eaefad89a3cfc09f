// Storage maps are checked as plans are (models/storage_check.h). The problem here: tensors 'a'
// [4, 6] and 'b' [2, 6], bf16, on one training rank (0) and one inference rank (1), each rank
// holding both whole. A map over it is hand-made per case; every refusal names the rank's place
// in the map, the region and the parameter. The maps the frameworks' rules make all pass
// (StorageCheck.EveryMapTheRulesMakePasses), and the memory check agrees with a brute-force
// count of where each element lands (StorageCheck.MemoryCheckAgreesWithBruteForce).
#include "refit/models/storage_check.h"

#include <random>
#include <set>
#include <string>

#include <gtest/gtest.h>

#include "refit/models/hf_config.h"
#include "refit/models/problem_builder.h"
#include "test_problems.h"

namespace refit::models {
namespace {

using testing::make_layout;
using testing::make_reshard;
using testing::rank_range;

ReshardProblem two_tensors() {
  const auto whole = [](Shape s, std::int32_t rank) {
    return make_layout(std::move(s), {1}, rank_range(rank, 1), "R");
  };
  return ReshardProblem::make({make_reshard("a", {4, 6}, whole({4, 6}, 0), whole({4, 6}, 1)),
                               make_reshard("b", {2, 6}, whole({2, 6}, 0), whole({2, 6}, 1))},
                              1, 1)
      .value();
}

StoredRegion region(std::uint32_t tensor, Box box, std::int32_t parameter, std::int64_t offset,
                    Shape strides) {
  return StoredRegion{.tensor = tensor,
                      .box = std::move(box),
                      .parameter = parameter,
                      .offset = offset,
                      .strides = std::move(strides)};
}

// One parameter 'w' of 36 elements ([6, 6]) on the inference rank: 'a' in rows 0-3, 'b' in rows 4-5.
StorageMap destination_map() {
  RankStorage r{.parameters = {FrameworkParameter{.name = "w", .shape = {6, 6}, .dtype = DType::kBF16}},
                .regions = {region(0, Box{{0, 0}, {4, 6}}, 0, 0, {6, 1}),
                            region(1, Box{{0, 0}, {2, 6}}, 0, 24, {6, 1})}};
  return StorageMap{.framework = "vllm", .first_rank = 1, .ranks = {r}};
}

std::string refusal(const StorageMap& map) {
  const auto r = check_storage(map, two_tensors(), false, "storage.destination");
  return r ? std::string("accepted") : r.error().message;
}

TEST(StorageCheck, AMapThatTilesEveryBoxInDisjointMemoryPasses) {
  EXPECT_EQ(refusal(destination_map()), "accepted");
}

TEST(StorageCheck, ABoxWithoutRegionsWouldDropItsBytes) {
  // 'b' lost its region: what rank 1 receives of it went nowhere, and --verify checked only regions.
  auto map = destination_map();
  map.ranks[0].regions.pop_back();
  EXPECT_EQ(
      refusal(map),
      "storage.destination.ranks[0]: no region holds the rank's box [0:2, 0:6] of tensor 'b': its bytes "
      "would be dropped");
}

TEST(StorageCheck, RegionsThatCoverPartOfTheBoxOrShareElementsAreRefused) {
  auto part = destination_map();
  part.ranks[0].regions[0].box = Box{{0, 0}, {3, 6}};  // 18 of a's 24 elements
  EXPECT_EQ(
      refusal(part),
      "storage.destination.ranks[0]: the regions of tensor 'a' hold 18 of the 24 elements of the rank's box "
      "[0:4, 0:6]: the others' bytes would be dropped");
  auto twice = destination_map();
  twice.ranks[0].parameters.push_back(FrameworkParameter{.name = "x", .shape = {6}, .dtype = DType::kBF16});
  twice.ranks[0].regions.push_back(region(0, Box{{3, 0}, {1, 6}}, 1, 0, {6, 1}));  // row 3 of 'a' again
  EXPECT_EQ(
      refusal(twice),
      "storage.destination.ranks[0].regions[0] and storage.destination.ranks[0].regions[2]: boxes [0:4, 0:6] "
      "and [3:4, 0:6] of tensor 'a' share elements (each element of the rank's box lies in one region)");
}

TEST(StorageCheck, RegionsThatAliasOneParametersMemoryAreRefused) {
  // 'b' written over rows 2-3 of 'a': 12 elements of w would take bytes of both.
  auto map = destination_map();
  map.ranks[0].regions[1].offset = 12;
  EXPECT_EQ(
      refusal(map),
      "storage.destination.ranks[0].regions[0] and storage.destination.ranks[0].regions[1]: elements of both "
      "lie in one place of parameter 'w'");
  // One region whose strides fold its box onto itself: rows 1 element apart, 6 elements wide.
  auto folded = destination_map();
  folded.ranks[0].regions[0].strides = {1, 1};
  EXPECT_EQ(
      refusal(folded),
      "storage.destination.ranks[0].regions[0]: its strides put two elements of its box in one place of "
      "parameter 'w'");
}

TEST(StorageCheck, InterleavedRegionsThatShareNoElementPass) {
  // 'a' in the even columns of a [4, 12] parameter and 'b'... in its odd columns of rows 0-1: their
  // bounding ranges meet, so they are compared run by run, and no run meets another.
  auto map = destination_map();
  map.ranks[0].parameters[0].shape = {4, 12};
  map.ranks[0].regions[0] = region(0, Box{{0, 0}, {4, 6}}, 0, 0, {12, 2});
  map.ranks[0].regions[1] = region(1, Box{{0, 0}, {2, 6}}, 0, 1, {12, 2});
  EXPECT_EQ(refusal(map), "accepted");
}

TEST(StorageCheck, ParametersAreNamedOnceAndSizedWithoutOverflow) {
  auto twice = destination_map();
  twice.ranks[0].parameters.push_back(FrameworkParameter{.name = "w", .shape = {1}, .dtype = DType::kBF16});
  EXPECT_EQ(
      refusal(twice),
      "storage.destination.ranks[0].parameters[1]: a second parameter named 'w' (the rank's names must be "
      "unique)");
  // [2^58 + 1, 64] has 2^64 + 64 elements: it wrapped to 64 and ran.
  auto huge = destination_map();
  huge.ranks[0].parameters[0].shape = {(std::int64_t{1} << 58) + 1, 64};
  const auto r = check_storage(huge, two_tensors(), false, "storage.destination");
  ASSERT_FALSE(r);
  EXPECT_EQ(r.error().code, ErrorCode::kOutOfRange);
  EXPECT_NE(r.error().message.find("storage.destination.ranks[0].parameters[0]: parameter 'w'"),
            std::string::npos)
      << r.error().message;
}

TEST(StorageCheck, ARegionOutsideTheRanksBoxOrItsParameterOrOfAnotherDtypeIsRefused) {
  auto outside = destination_map();
  outside.ranks[0].regions[1].box = Box{{1, 0}, {2, 6}};  // rows 1-2 of a [2, 6] tensor
  EXPECT_EQ(
      refusal(outside),
      "storage.destination.ranks[0].regions[1]: box [1:3, 0:6] of tensor 'b' is not part of the rank's box "
      "[0:2, 0:6]");
  auto past = destination_map();
  past.ranks[0].regions[1].offset = 25;
  EXPECT_EQ(refusal(past),
            "storage.destination.ranks[0].regions[1]: the region reaches element 37 of parameter 'w', which "
            "has 36");
  auto dtype = destination_map();
  dtype.ranks[0].parameters[0].dtype = DType::kFP32;
  EXPECT_EQ(
      refusal(dtype),
      "storage.destination.ranks[0].regions[0]: parameter 'w' is fp32, but tensor 'a' is bf16 on this side");
}

// Property: over random regions of a [4, 6] box laid into a 40-element parameter with random
// offsets and strides, the check refuses exactly when some parameter element would hold two
// elements of the box (counted by brute force), given the regions tile the box.
TEST(StorageCheck, MemoryCheckAgreesWithBruteForce) {
  std::mt19937 rng(2912);
  int refused = 0, accepted = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    // 'a' cut into two row bands at a random row; 'b' as in destination_map but in its own parameter.
    const std::int64_t cut = 1 + rng() % 3;
    const Box top{{0, 0}, {cut, 6}}, bottom{{cut, 0}, {4 - cut, 6}};
    auto map = destination_map();
    map.ranks[0].parameters = {FrameworkParameter{.name = "w", .shape = {40}, .dtype = DType::kBF16},
                               FrameworkParameter{.name = "v", .shape = {12}, .dtype = DType::kBF16}};
    std::vector<StoredRegion> regions;
    for (const Box& b : {top, bottom}) {
      const Shape strides{1 + static_cast<std::int64_t>(rng() % 8), 1 + static_cast<std::int64_t>(rng() % 3)};
      const auto reach = (b.extent[0] - 1) * strides[0] + (b.extent[1] - 1) * strides[1] + 1;
      if (reach > 40) continue;
      regions.push_back(region(0, b, 0, static_cast<std::int64_t>(rng() % (41 - reach)), strides));
    }
    if (regions.size() != 2) continue;
    regions.push_back(region(1, Box{{0, 0}, {2, 6}}, 1, 0, {6, 1}));
    map.ranks[0].regions = regions;
    std::multiset<std::int64_t> places;
    for (std::size_t k = 0; k < 2; ++k)
      for (std::int64_t i = 0; i < regions[k].box.extent[0]; ++i)
        for (std::int64_t j = 0; j < 6; ++j)
          places.insert(regions[k].offset + i * regions[k].strides[0] + j * regions[k].strides[1]);
    const bool shared = std::set<std::int64_t>(places.begin(), places.end()).size() != places.size();
    EXPECT_EQ(refusal(map) != "accepted", shared) << "trial " << trial << ": " << refusal(map);
    (shared ? refused : accepted)++;
  }
  EXPECT_GT(refused, 100);
  EXPECT_GT(accepted, 100);
}

TEST(StorageCheck, EveryMapTheRulesMakePasses) {
  for (const auto& [config, train, infer] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"tiny-llama.json", "tp=2", "tp=1,dp=2"},
           {"tiny-llama.json", "tp=1,pp=2", "tp=2"},
           {"tiny-qwen3-moe.json", "tp=2,ep=2,etp=1", "tp=2,dp=2"},
           {"tiny-qwen3-moe.json", "tp=2,ep=2", "tp=2,ep=1"},
           {"tiny-deepseek-v3.json", "pp=2,ep=2", "tp=2"}}) {
    SCOPED_TRACE(config + " " + train + " -> " + infer);
    const auto model = load_hf_config(std::string(REFIT_TEST_DATA_DIR) + "/models/" + config, {}).value();
    const auto t = parse_megatron(train).value();
    const auto i = parse_vllm(infer).value();
    const auto problem = build_problem(model, t, i).value();
    const auto source = check_storage(megatron_storage(model, t, problem).value(), problem, true, "megatron");
    EXPECT_TRUE(source) << source.error().message;
    const auto destination = check_storage(vllm_storage(model, i, problem).value(), problem, false, "vllm");
    EXPECT_TRUE(destination) << destination.error().message;
  }
}

}  // namespace
}  // namespace refit::models
