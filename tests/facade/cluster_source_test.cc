// A cluster file's own placement (its "placement": rank_to_gpu and source_ranks) is used by the
// commands that place a problem's job on it, or refused when it places another job: it used to be
// replaced silently by the default placement, so a colocated placement predicted the same as
// separate GPUs.
#include "refit/facade/cluster_source.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "refit/topology/cluster_json.h"
#include "refit/topology/presets.h"

namespace refit {
namespace {

// One DGX H100 node with 2 training + 2 inference ranks placed on GPUs `gpus`, as a file.
std::filesystem::path cluster_file(const std::vector<std::int32_t>& gpus) {
  const auto cluster = make_preset_cluster("dgx-h100:nodes=1").value();
  std::vector<GpuId> rank_to_gpu;
  for (const auto g : gpus) rank_to_gpu.push_back(GpuId{g});
  const auto ranks = RankMap::make(cluster, rank_to_gpu, 2).value();
  const auto path =
      std::filesystem::temp_directory_path() / ("refit_placement_" + std::to_string(gpus.size()) + ".json");
  std::ofstream(path) << cluster_to_json(cluster, &ranks).dump();
  return path;
}

TEST(ClusterFile, ItsPlacementIsTheJobsWhenItPlacesTheSameRanks) {
  // Colocated: inference ranks 2 and 3 on the training ranks' GPUs 0 and 1.
  const auto path = cluster_file({0, 1, 0, 1});
  const auto loaded = load_cluster({.file = path.string()}, {.source_ranks = 2, .destination_ranks = 2});
  std::filesystem::remove(path);
  ASSERT_TRUE(loaded) << loaded.error().message;
  EXPECT_EQ(loaded->placed.gpu_of(Rank{2}), GpuId{0});
  EXPECT_EQ(loaded->placed.gpu_of(Rank{3}), GpuId{1});
}

TEST(ClusterFile, APlacementOfAnotherJobOrBesideOptionsIsRefusedNamingBoth) {
  const auto path = cluster_file({0, 1, 2});  // 2 training + 1 inference rank
  const auto other = load_cluster({.file = path.string()}, {.source_ranks = 2, .destination_ranks = 2});
  ASSERT_FALSE(other);
  EXPECT_EQ(other.error().code, ErrorCode::kMismatch);
  EXPECT_NE(
      other.error().message.find("placement: the file places 2 training + 1 inference ranks, the problem has "
                                 "2 + 2"),
      std::string::npos)
      << other.error().message;
  const auto beside = load_cluster({.file = path.string()},
                                   {.source_ranks = 2, .destination_ranks = 1, .destination_offset = 4});
  std::filesystem::remove(path);
  ASSERT_FALSE(beside);
  EXPECT_EQ(beside.error().code, ErrorCode::kInvalidArgument);
}

}  // namespace
}  // namespace refit
