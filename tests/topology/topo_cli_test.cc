// refit topo through the real binary: output contract and exit codes.
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

const std::string kDir = std::string(REFIT_TEST_DATA_DIR) + "/topology/";

TEST(TopoCli, PresetAsJsonHasTheFileFormat) {
  // 8 + 8 ranks on dgx-h100: 2 nodes, 16 GPUs, 16 NICs, 2 domains.
  const auto r = run_refit("topo --cluster dgx-h100 --train-ranks 8 --infer-ranks 8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["name"], "dgx-h100");
  EXPECT_EQ(j["gpus"].size(), 16u);
  EXPECT_EQ(j["nics"].size(), 16u);
  EXPECT_EQ(j["domains"].size(), 2u);
  EXPECT_EQ(j["nics"][0]["gbps"], 47.0);
  EXPECT_EQ(j["placement"]["source_ranks"], 8);
  EXPECT_TRUE(r.err.empty()) << r.err;
}

TEST(TopoCli, HumanOutputNamesTheParts) {
  const auto r = run_refit(
      "topo --cluster gb200-nvl72:gpus_per_domain=64,nic_gbps=400 --train-ranks 64 --infer-ranks 64");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("32 nodes, 128 GPUs, 2 NVLink domains, 128 NICs"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("64 training ranks on GPUs 0-63; 64 inference ranks on GPUs 64-127"),
            std::string::npos);
}

TEST(TopoCli, ClusterFileRoundTripsThroughTheCli) {
  // --json output saved as a file and loaded with --cluster-file prints the same JSON.
  const auto first =
      run_refit("topo --nccl-topo-xml " + kDir + "node_4gpu_2nic.xml --train-ranks 4 --infer-ranks 4 --json");
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const auto file =
      std::filesystem::temp_directory_path() / ("refit_topo_" + std::to_string(::getpid()) + ".json");
  std::ofstream(file) << first.out;
  const auto second = run_refit("topo --cluster-file " + file.string() + " --json");
  std::filesystem::remove(file);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(second.out, first.out);
}

TEST(TopoCli, DiscoverWithoutGpusSaysSoAndSucceeds) {
  const auto r =
      run_refit("topo --discover --nvml-library /nonexistent/libnvidia-ml.so.1 --sysfs-root /nonexistent");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no NVIDIA GPU"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("no RDMA NIC"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("cluster discovered: 1 node, 1 GPU"), std::string::npos) << r.out;
}

struct BadInput {
  std::string args;
  const char* must_mention;
  friend void PrintTo(const BadInput& b, std::ostream* os) { *os << b.args; }
};

class TopoCliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(TopoCliBadInput, ExitsTwoNamingTheField) {
  const auto r = run_refit(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
  EXPECT_NE(r.err.find(GetParam().must_mention), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopoCliBadInput,
    ::testing::Values(
        BadInput{"topo --cluster-file " + kDir + "bad_missing_node.json", "gpus[3].node: missing"},
        BadInput{"topo --cluster gb200-nvl72:gpus_per_domian=64", "unknown key 'gpus_per_domian'"},
        BadInput{"topo --cluster-file " + kDir + "bad_gpu_two_domains.json",
                 "domains[1].gpus[2]: GPU 1 is already in domain 0"},
        BadInput{"topo --cluster-file " + kDir + "bad_nic_missing_gpu.json",
                 "nics[1].gpus[0]: GPU 7 does not exist"},
        BadInput{"topo --nccl-topo-xml " + kDir + "malformed_syntax.xml", "not well-formed XML"},
        BadInput{"topo --nccl-topo-xml " + kDir + "malformed_gpu_without_sm.xml", "attribute 'sm' missing"},
        BadInput{"topo --cluster dgx-a100", "unknown preset 'dgx-a100'"},
        BadInput{"topo --cluster-file /nonexistent/cluster.json", "no such file"},
        BadInput{"topo --cluster dgx-h100:nodes=1 --train-ranks 8 --infer-ranks 8", "too few"},
        BadInput{"topo", "--cluster"}, BadInput{"topo --cluster dgx-h100 --cluster-file x.json", "--cluster"},
        BadInput{"topo --cluster dgx-h100 --sysfs-root /tmp", "--discover"}));

}  // namespace
}  // namespace refit
