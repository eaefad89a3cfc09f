// Live discovery on fake machines: a sysfs tree built in a temporary folder and the fake NVML
// library built by these tests (fake_nvml.cc), told what to report through a config file.
#include "refit/topology/discovery.h"
#include "refit/topology/cluster_json.h"
#include "refit/topology/rank_map.h"

#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "fake_sysfs.h"

namespace refit {
namespace {

using refit::testing::FakeSysfs;

bool mentions(const std::vector<std::string>& notes, const std::string& text) {
  for (const auto& n : notes)
    if (n.find(text) != std::string::npos) return true;
  return false;
}

std::string nic_name_of(const Cluster& c, std::int32_t gpu) {
  const auto nic = c.nic_of(GpuId{gpu});
  return nic ? c.nics()[static_cast<std::size_t>(*nic)].name : "none";
}

class TopoDiscovery : public ::testing::Test {
 protected:
  // Describes the fake machine to the fake NVML (which reads the file named by the variable).
  void nvml_reports(const std::string& config) {
    ::setenv("REFIT_FAKE_NVML_CONFIG", sysfs_.write_file("nvml.txt", config).c_str(), 1);
  }

  [[nodiscard]] Result<Discovery> discover(const char* library = REFIT_FAKE_NVML_PATH,
                                           std::int32_t ranks = 0) {
    return discover_cluster({sysfs_.root(), library}, ranks);
  }

  // An HGX H100 board: GPU g and an RDMA NIC under PCIe switch g/2's downstream port g, so GPU g's
  // closest NIC is the one under the same port. The NIC under GPU g's port is named
  // mlx5_<7-g>, so pairing cannot follow names or order.
  void build_h100_board() {
    std::string config;
    for (int g = 0; g < 8; ++g) {
      const int numa = g / 4;
      const auto root = fmt::format("pci0000:{:02x}", numa * 0x80);
      const auto up = fmt::format("0000:{:02x}:01.0", numa * 0x80);
      const auto sw = fmt::format("0000:{:02x}:00.0", numa * 0x80 + 0x10 + g / 2 * 0x10);
      const auto port = fmt::format("0000:{:02x}:0{}.0", numa * 0x80 + 0x11 + g / 2 * 0x10, g % 2);
      const auto gpu = fmt::format("0000:{:02x}:00.0", numa * 0x80 + 0x18 + g);
      const auto nic = fmt::format("0000:{:02x}:00.1", numa * 0x80 + 0x18 + g);
      sysfs_.add_pci_device({root, up, sw, port, gpu}, numa);
      const auto nic_dir = sysfs_.add_pci_device({root, up, sw, port, nic}, numa);
      sysfs_.add_rdma_nic(fmt::format("mlx5_{}", 7 - g), nic_dir, {{"4: ACTIVE", "400 Gb/sec (4X NDR)"}});
      config += fmt::format("gpu {} 90 NVIDIA H100 80GB HBM3\n", gpu);
      for (int l = 0; l < 18; ++l) config += fmt::format("link {} 0000:0{}:00.0 switch\n", g, 5 + l % 4);
    }
    nvml_reports(config);
  }

  FakeSysfs sysfs_;
};

TEST_F(TopoDiscovery, H100BoardWithRailNics) {
  // 18 active links to NVSwitches per GPU: one domain, 18 x 20.6 = 370.8 GB/s; each GPU paired
  // with the NIC under its own PCIe port (deepest shared switch), 400 Gb/s -> 47 GB/s.
  build_h100_board();
  const auto found = discover();
  ASSERT_TRUE(found.has_value()) << found.error().message;
  const auto& c = found->cluster;
  ASSERT_EQ(c.gpus().size(), 8u);
  ASSERT_EQ(c.domains().size(), 1u);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{3}).nvlink_bandwidth.gbps(), 370.8);
  EXPECT_EQ(c.gpu(GpuId{0}).pci_bus_id, "0000:18:00.0");  // NVML's 00000000:18:00.0, normalized
  ASSERT_EQ(c.nics().size(), 8u);
  EXPECT_EQ(c.nics()[0].name, "mlx5_0:1");
  EXPECT_DOUBLE_EQ(c.nics()[0].bandwidth.gbps(), 47.0);
  for (int g = 0; g < 8; ++g) EXPECT_EQ(nic_name_of(c, g), fmt::format("mlx5_{}:1", 7 - g)) << g;
  EXPECT_TRUE(found->notes.empty()) << found->notes.front();
}

TEST_F(TopoDiscovery, DownPortsAndBadRatesAreSkippedWithANote) {
  const auto dir = sysfs_.add_pci_device({"pci0000:00", "0000:00:01.0", "0000:01:00.0"});
  sysfs_.add_rdma_nic("mlx5_0", dir,
                      {{"1: DOWN", "400 Gb/sec (4X NDR)"}, {"4: ACTIVE", "200 Gb/sec (2X HDR)"}});
  sysfs_.add_rdma_nic("mlx5_1", dir, {{"4: ACTIVE", "fast"}});
  // Rates that read but no NIC has once failed the whole discovery, naming "nics[0].gbps".
  sysfs_.add_rdma_nic("mlx5_2", dir, {{"4: ACTIVE", "nan Gb/sec"}});
  sysfs_.add_rdma_nic("mlx5_3", dir, {{"4: ACTIVE", "1e300 Gb/sec"}});
  sysfs_.add_rdma_nic("mlx5_4", dir, {{"4: ACTIVE", "0 Gb/sec"}});
  nvml_reports("gpu 0000:02:00.0 90 NVIDIA H100\n");
  const auto found = discover();
  ASSERT_TRUE(found.has_value()) << found.error().message;
  // Only port 2 of mlx5_0 is used: 200 Gb/s -> 23.5 GB/s; the GPU is not in sysfs, so it is
  // paired without locality (the only NIC) and a note says so.
  ASSERT_EQ(found->cluster.nics().size(), 1u);
  EXPECT_EQ(found->cluster.nics()[0].name, "mlx5_0:2");
  EXPECT_DOUBLE_EQ(found->cluster.nics()[0].bandwidth.gbps(), 23.5);
  EXPECT_EQ(found->cluster.nics()[0].pci_bus_id, "0000:01:00.0");
  EXPECT_EQ(found->cluster.nic_of(GpuId{0}), std::optional<std::int32_t>(0));
  EXPECT_TRUE(mentions(found->notes, "mlx5_0:1: port state '1: DOWN'"));
  EXPECT_TRUE(mentions(found->notes, "mlx5_1:1: rate 'fast'"));
  for (const char* bad : {"mlx5_2:1: rate 'nan Gb/sec' is outside",
                          "mlx5_3:1: rate '1e300 Gb/sec' is outside", "mlx5_4:1: rate '0 Gb/sec' is outside"})
    EXPECT_TRUE(mentions(found->notes, bad)) << bad;
  EXPECT_TRUE(mentions(found->notes, "without PCIe locality"));
}

TEST_F(TopoDiscovery, AttributesThatLeaveTheTreeOrAreNotFilesAreNotRead) {
  // mlx5_0's port state is a link to a file outside the tree that says ACTIVE, mlx5_1's a FIFO
  // that nobody writes: neither is read (the FIFO would block the scan), so neither port is used,
  // and the outside file's words appear in no note.
  const auto dir = sysfs_.add_pci_device({"pci0000:00", "0000:00:01.0", "0000:01:00.0"});
  sysfs_.add_rdma_nic("mlx5_0", dir, {{"4: ACTIVE", "400 Gb/sec (4X NDR)"}});
  sysfs_.add_rdma_nic("mlx5_1", dir, {{"4: ACTIVE", "400 Gb/sec (4X NDR)"}});
  const auto outside = sysfs_.root().parent_path() / (sysfs_.root().filename().string() + "_outside");
  std::ofstream(outside) << "4: ACTIVE outside the tree\n";
  const auto ports = sysfs_.root() / "class" / "infiniband";
  std::filesystem::remove(ports / "mlx5_0" / "ports" / "1" / "state");
  std::filesystem::create_symlink(outside, ports / "mlx5_0" / "ports" / "1" / "state");
  std::filesystem::remove(ports / "mlx5_1" / "ports" / "1" / "state");
  ASSERT_EQ(::mkfifo((ports / "mlx5_1" / "ports" / "1" / "state").c_str(), 0600), 0);
  nvml_reports("gpu 0000:02:00.0 90 NVIDIA H100\n");
  const auto found = discover();
  std::filesystem::remove(outside);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_TRUE(found->cluster.nics().empty());
  EXPECT_TRUE(mentions(found->notes, "mlx5_0:1: port state '', not used"));
  EXPECT_TRUE(mentions(found->notes, "mlx5_1:1: port state '', not used"));
  EXPECT_FALSE(mentions(found->notes, "outside the tree"));
}

TEST_F(TopoDiscovery, DirectLinksMakePairDomains) {
  // Two NVLink-bridged pairs (4 links each, 4 x 20.6 = 82.4 GB/s); no NIC in sysfs.
  nvml_reports(
      "gpu 0000:11:00.0 90 NVIDIA H100 NVL\ngpu 0000:12:00.0 90 NVIDIA H100 NVL\n"
      "gpu 0000:21:00.0 90 NVIDIA H100 NVL\ngpu 0000:22:00.0 90 NVIDIA H100 NVL\n"
      "link 0 0000:12:00.0 gpu\nlink 0 0000:12:00.0 gpu\nlink 0 0000:12:00.0 gpu\nlink 0 0000:12:00.0 gpu\n"
      "link 1 0000:11:00.0 gpu\nlink 1 0000:11:00.0 gpu\nlink 1 0000:11:00.0 gpu\nlink 1 0000:11:00.0 gpu\n"
      "link 2 0000:22:00.0 gpu\nlink 3 0000:21:00.0 gpu\n");
  const auto found = discover();
  ASSERT_TRUE(found.has_value()) << found.error().message;
  const auto& c = found->cluster;
  ASSERT_EQ(c.domains().size(), 2u);
  EXPECT_EQ(c.domain_of(GpuId{1}), 0);
  EXPECT_EQ(c.domain_of(GpuId{2}), 1);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).nvlink_bandwidth.gbps(), 82.4);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{2}).nvlink_bandwidth.gbps(), 20.6);
  EXPECT_TRUE(c.nics().empty());
  EXPECT_TRUE(mentions(found->notes, "no RDMA NIC"));
  // An H100 NVL is not the SXM5 refit's kernels ran on: the copy is the reference's scaled by the
  // H100's HBM line (1122 x 3.35 / 3.35), no quantize rate of its own, and the cluster says so.
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).copy_bandwidth.gbps(), 1122.0);
  EXPECT_EQ(c.gpu(GpuId{0}).quantize_bandwidth, QuantizeRates{});
  ASSERT_EQ(c.spec().assumptions.size(), 1u);
  EXPECT_TRUE(
      c.spec().assumptions[0].starts_with("pack/unpack on the NVIDIA H100 NVL is charged at 1122 GB/s"))
      << c.spec().assumptions[0];
}

TEST_F(TopoDiscovery, OldNvmlWithoutRemoteTypeTreatsNonGpuRemotesAsSwitches) {
  // Without nvmlDeviceGetNvLinkRemoteDeviceType, a remote that is no listed GPU is a switch: the
  // two GPUs join the switch plane; and there is no fabric info to ask.
  nvml_reports(
      "gpu 0000:11:00.0 100 NVIDIA B200\ngpu 0000:12:00.0 100 NVIDIA B200\n"
      "link 0 0000:05:00.0 switch\nlink 1 0000:06:00.0 switch\n");
  const auto found = discover(REFIT_FAKE_NVML_OLD_PATH);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  ASSERT_EQ(found->cluster.domains().size(), 1u);
  EXPECT_DOUBLE_EQ(found->cluster.gpu(GpuId{1}).nvlink_bandwidth.gbps(), 40.1);
}

TEST_F(TopoDiscovery, FabricCliqueJoinsGpusAndIsNoted) {
  // GB200 tray: GPUs 0-2 report a COMPLETED (3) fabric registration in clique 7; GPU 3's is
  // still in progress (2), so it stays apart. No NVLink entries, to isolate the clique rule.
  const std::string uuid = "0123456789abcdef0123456789abcdef";
  nvml_reports(
      fmt::format("gpu 0009:01:00.0 100 NVIDIA GB200\ngpu 0009:02:00.0 100 NVIDIA GB200\n"
                  "gpu 0019:01:00.0 100 NVIDIA GB200\ngpu 0019:02:00.0 100 NVIDIA GB200\n"
                  "fabric 0 {0} 7 3\nfabric 1 {0} 7 3\nfabric 2 {0} 7 3\nfabric 3 {0} 7 2\n",
                  uuid));
  const auto found = discover();
  ASSERT_TRUE(found.has_value()) << found.error().message;
  const auto& c = found->cluster;
  ASSERT_EQ(c.domains().size(), 2u);
  EXPECT_EQ(c.domains()[0].gpus, (std::vector<GpuId>{GpuId{0}, GpuId{1}, GpuId{2}}));
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).copy_bandwidth.gbps(), 2679.0);  // the H100's 1122 x 8 / 3.35
  EXPECT_TRUE(mentions(found->notes, "GPUs 0,1,2 are in multi-node NVLink clique " + uuid + "/7"));
  // Joined by the clique alone, they reach each other over NVLink at the model's figure.
  EXPECT_GT(c.gpu(GpuId{0}).nvlink_bandwidth.value, 0);
  EXPECT_TRUE(mentions(c.spec().assumptions,
                       "GPU 0 reports no NVLink links but shares an NVLink domain with others"));
}

TEST_F(TopoDiscovery, NoNvmlModelsTheHost) {
  // No NVML, no /sys/class/infiniband: 2 + 2 processes as cpu-host does, with notes.
  const auto found = discover("/nonexistent/libnvidia-ml.so.1", 4);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  EXPECT_EQ(found->cluster.name(), "discovered");
  EXPECT_EQ(found->cluster.gpus().size(), 4u);
  EXPECT_EQ(found->cluster.domains().size(), 1u);
  ASSERT_EQ(found->cluster.nics().size(), 1u);
  EXPECT_EQ(found->cluster.nics()[0].name, "loopback");
  EXPECT_TRUE(
      mentions(found->notes, "no NVIDIA GPU: NVML (/nonexistent/libnvidia-ml.so.1) could not be loaded"));
  EXPECT_TRUE(mentions(found->notes, "no RDMA NIC"));
  EXPECT_TRUE(mentions(found->notes, "modelled this host as 4 process(es)"));
}

TEST_F(TopoDiscovery, NvmlThatDoesNotStartAndRdmaNicsServeHostProcesses) {
  // NVML loads but init fails (no config: "driver not loaded"); two RDMA NICs take the three
  // host processes in turn: NIC 0 gets processes 0 and 2, NIC 1 process 1.
  ::unsetenv("REFIT_FAKE_NVML_CONFIG");
  sysfs_.add_rdma_nic("mlx5_0", sysfs_.add_pci_device({"pci0000:00", "0000:01:00.0"}),
                      {{"4: ACTIVE", "400 Gb/sec (4X NDR)"}});
  sysfs_.add_rdma_nic("mlx5_1", sysfs_.add_pci_device({"pci0000:00", "0000:02:00.0"}),
                      {{"4: ACTIVE", "400 Gb/sec (4X NDR)"}});
  const auto found = discover(REFIT_FAKE_NVML_PATH, 3);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  ASSERT_EQ(found->cluster.nics().size(), 2u);
  EXPECT_EQ(found->cluster.nics()[0].gpus, (std::vector<GpuId>{GpuId{0}, GpuId{2}}));
  EXPECT_TRUE(mentions(found->notes, "NVML did not start: Driver Not Loaded"));
}

TEST_F(TopoDiscovery, NvmlFailingMidwayIsARuntimeError) {
  nvml_reports("gpu 0000:11:00.0 90 NVIDIA H100\nfail nvmlDeviceGetPciInfo_v3\n");
  const auto found = discover();
  ASSERT_FALSE(found.has_value());
  EXPECT_EQ(found.error().code, ErrorCode::kRuntime);
  EXPECT_NE(found.error().message.find("nvmlDeviceGetPciInfo_v3 failed for GPU 0"), std::string::npos)
      << found.error().message;
}

TEST_F(TopoDiscovery, ANameWithAnEscapeIsPrintedWithoutIt) {
  // NVML's name for the GPU holds a terminal escape (ESC [31m): it reached the terminal raw, and
  // the cluster file written from it could not be loaded back (a control character in a sentence).
  nvml_reports("gpu 0000:11:00.0 90 \x1b[31mRED\n");
  const auto found = discover();
  ASSERT_TRUE(found.has_value()) << found.error().message;
  const auto text = cluster_to_json(found->cluster).dump();
  EXPECT_EQ(text.find('\x1b'), std::string::npos);
  EXPECT_EQ(text.find("\\u001b"), std::string::npos) << text;
  const auto back = parse_cluster_json(text);
  EXPECT_TRUE(back.has_value()) << back.error().message;
}

TEST_F(TopoDiscovery, WhatNoMachineHasIsRefusedAsTheNcclDumpsAre) {
  // A GPU linked to itself, two GPUs on one PCI bus id, and 2000 GPUs on one node: the NCCL XML
  // importer refused them, and discovery now does too, by the same rules.
  const std::pair<std::string, std::string> cases[] = {
      {"gpu 0000:18:00.0 90 X\nlink 0 0000:18:00.0 gpu\n", "GPU 0 (X, 0000:18:00.0): an NVLink to itself"},
      {"gpu 0000:18:00.0 90 X\ngpu 0000:18:00.0 90 Y\n",
       "GPU 0 (X, 0000:18:00.0) and GPU 1 (Y, 0000:18:00.0): one PCI bus id"}};
  for (const auto& [config, message] : cases) {
    nvml_reports(config);
    const auto found = discover();
    ASSERT_FALSE(found.has_value()) << config;
    EXPECT_EQ(found.error().code, ErrorCode::kInvalidArgument);
    EXPECT_NE(found.error().message.find(message), std::string::npos) << found.error().message;
  }
  std::string many;
  for (int g = 0; g < 1025; ++g) many += fmt::format("gpu 0000:{:02x}:{:02x}.0 90 X\n", g / 32, g % 32);
  nvml_reports(many);
  const auto found = discover();
  ASSERT_FALSE(found.has_value());
  EXPECT_NE(found.error().message.find("1025 GPUs and 0 NICs in one machine: more than the 1024"),
            std::string::npos)
      << found.error().message;
}

TEST_F(TopoDiscovery, TooManyRanksForTheNodeIsBadInput) {
  // Discovery sees one node of one GPU; two ranks do not fit on it.
  nvml_reports("gpu 0000:11:00.0 90 NVIDIA H100\n");
  const auto found = discover(REFIT_FAKE_NVML_PATH, 2);
  ASSERT_TRUE(found.has_value()) << found.error().message;
  const auto ranks = RankMap::place(found->cluster, {.source_ranks = 2});
  ASSERT_FALSE(ranks.has_value());
  EXPECT_EQ(ranks.error().code, ErrorCode::kMismatch);
  EXPECT_NE(ranks.error().message.find("too few"), std::string::npos) << ranks.error().message;
}

}  // namespace
}  // namespace refit
