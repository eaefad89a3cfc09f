#include "refit/topology/nccl_xml.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/core/text_file.h"

namespace refit {
namespace {

const std::string kDir = std::string(REFIT_TEST_DATA_DIR) + "/topology/";

Cluster load(const std::string& file, std::int32_t min_gpus = 0) {
  auto c = load_nccl_topology_file(kDir + file, min_gpus);
  EXPECT_TRUE(c.has_value()) << file << ": " << (c ? "" : c.error().message);
  return std::move(c).value();
}

std::string nic_name_of(const Cluster& c, std::int32_t gpu) {
  const auto nic = c.nic_of(GpuId{gpu});
  return nic ? c.nics()[static_cast<std::size_t>(*nic)].name : "none";
}

TEST(TopoNcclXml, H100NodeWithRailNics) {
  // 8 GPUs, each with 5+5+4+4 = 18 links to the 4 NVSwitches: one domain at 18 x 20.6 = 370.8
  // GB/s. Each GPU shares its innermost PCIe switch with mlx5_<dev>, 400 Gb/s -> 47 GB/s.
  const auto c = load("h100_8gpu_8nic.xml");
  ASSERT_EQ(c.gpus().size(), 8u);
  ASSERT_EQ(c.domains().size(), 1u);
  ASSERT_EQ(c.nics().size(), 8u);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).nvlink_bandwidth.gbps(), 370.8);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).copy_bandwidth.gbps(), 1122.0);  // H100 (device 0x2330): measured
  EXPECT_TRUE(c.spec().assumptions.empty());
  EXPECT_DOUBLE_EQ(c.nics()[0].bandwidth.gbps(), 47.0);
  // GPUs follow NCCL's dev order although dev 1 comes first in the file.
  EXPECT_EQ(c.gpu(GpuId{0}).pci_bus_id, "0000:18:00.0");
  EXPECT_EQ(c.gpu(GpuId{1}).pci_bus_id, "0000:1c:00.0");
  for (std::int32_t g = 0; g < 8; ++g) EXPECT_EQ(nic_name_of(c, g), "mlx5_" + std::to_string(g) + ":1");
  for (const auto& n : c.nics()) EXPECT_EQ(n.gpus.size(), 1u) << n.name;
}

TEST(TopoNcclXml, FourGpusTwoNicsUnderDifferentSwitches) {
  // GPU 0-1 and 2-3 are NVLink-bridged pairs (4 direct links each: 4 x 20.6 = 82.4 GB/s), so two
  // domains. GPUs 0,1 sit under the switch of mlx5_0, GPUs 2,3 under that of mlx5_1 (200 Gb/s
  // -> 23.5 GB/s), whatever the order of the file.
  const auto c = load("node_4gpu_2nic.xml");
  ASSERT_EQ(c.domains().size(), 2u);
  EXPECT_EQ(c.domains()[0].gpus, (std::vector<GpuId>{GpuId{0}, GpuId{1}}));
  EXPECT_EQ(c.domains()[1].gpus, (std::vector<GpuId>{GpuId{2}, GpuId{3}}));
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{2}).nvlink_bandwidth.gbps(), 82.4);
  EXPECT_EQ(nic_name_of(c, 0), "mlx5_0:1");
  EXPECT_EQ(nic_name_of(c, 1), "mlx5_0:1");
  EXPECT_EQ(nic_name_of(c, 2), "mlx5_1:1");
  EXPECT_EQ(nic_name_of(c, 3), "mlx5_1:1");
  EXPECT_DOUBLE_EQ(c.domain_nic_bandwidth(0).gbps(), 23.5);
}

TEST(TopoNcclXml, StorageNicsUnderTheCpuServeNoGpu) {
  // Each switch holds 2 GPUs and 2 rail NICs: the tie is broken by load, one NIC per GPU. The
  // storage NICs (under the CPU root ports) and eth0 (listed under both CPUs, kept once) are
  // listed but serve no GPU. B200: 18 x 40.1 = 721.8 GB/s of NVLink, one domain; copies at the
  // H100's 1122 GB/s x 8 / 3.35 = 2679 GB/s, which the cluster says it assumed.
  const auto c = load("node_storage_nics.xml");
  ASSERT_EQ(c.domains().size(), 1u);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).nvlink_bandwidth.gbps(), 721.8);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).copy_bandwidth.gbps(), 2679.0);
  ASSERT_EQ(c.spec().assumptions.size(), 1u);
  EXPECT_TRUE(c.spec().assumptions[0].starts_with("pack/unpack on the B200 is charged at 2679 GB/s"));
  ASSERT_EQ(c.nics().size(), 7u);
  EXPECT_EQ(nic_name_of(c, 0), "mlx5_2:1");
  EXPECT_EQ(nic_name_of(c, 1), "mlx5_3:1");
  EXPECT_EQ(nic_name_of(c, 2), "mlx5_4:1");
  EXPECT_EQ(nic_name_of(c, 3), "mlx5_5:1");
  for (const auto& n : c.nics()) {
    if (n.name == "mlx5_0:1" || n.name == "mlx5_1:1" || n.name == "eth0") {
      EXPECT_TRUE(n.gpus.empty()) << n.name;
    }
  }
  // 4 rail NICs x 47 GB/s; the storage NICs do not count.
  EXPECT_DOUBLE_EQ(c.domain_nic_bandwidth(0).gbps(), 188.0);
}

TEST(TopoNcclXml, CopiedToFitTheRanks) {
  // 16 GPUs of 8-GPU machines: two copies, each its own domain, NICs renumbered per node.
  const auto c = load("h100_8gpu_8nic.xml", 16);
  EXPECT_EQ(c.node_count(), 2);
  ASSERT_EQ(c.nics().size(), 16u);
  EXPECT_EQ(c.domain_of(GpuId{8}), 1);
  EXPECT_EQ(c.nics()[8].node, 1);
  EXPECT_EQ(c.nic_of(GpuId{8}), std::optional<std::int32_t>(9));  // as GPU 0 uses NIC 1
}

// One sm 90 GPU with PCI device id `device`, alone on a CPU.
Result<Cluster> one_sm90_gpu(std::string_view device) {
  return import_nccl_topology(fmt::format(R"(<system version="1"><cpu numaid="0">
      <pci busid="0000:18:00.0" class="0x030200" vendor="0x10de" device="{}">
        <gpu dev="0" sm="90"/></pci></cpu></system>)",
                                          device),
                              std::string(device));
}

TEST(TopoNcclXml, AnH100OtherThanTheSxm5IsNotTakenAsMeasured) {
  // sm 90 with PCI device 0x2331 (not the SXM5's 0x2330) is an H100 of some other part: refit's
  // kernels ran on the SXM5 only, so its figures are assumed and the cluster says so.
  const auto c = one_sm90_gpu("0x2331");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_EQ(c->gpu(GpuId{0}).quantize_bandwidth, QuantizeRates{});
  ASSERT_EQ(c->spec().assumptions.size(), 1u);
  EXPECT_TRUE(c->spec().assumptions[0].starts_with("pack/unpack on the H100 (its part not told apart) is "))
      << c->spec().assumptions[0];
}

TEST(TopoNcclXml, H200IsToldByItsPciDevice) {
  // sm 90 with PCI device 0x2335 is an H200: copies at the H100's 1122 GB/s x 4.8 / 3.35 = 1608 GB/s.
  const auto c = one_sm90_gpu("0x2335");
  ASSERT_TRUE(c.has_value()) << c.error().message;
  EXPECT_DOUBLE_EQ(c->gpu(GpuId{0}).copy_bandwidth.gbps(), 1608.0);
  // No NVLink: a domain of its own with no NVLink bandwidth, and no NIC.
  EXPECT_DOUBLE_EQ(c->gpu(GpuId{0}).nvlink_bandwidth.gbps(), 0.0);
  EXPECT_TRUE(c->nics().empty());
}

TEST(TopoNcclXml, AnNvlinkListedByOneEndOnlyOrTwiceIsRefused) {
  // node_4gpu_2nic.xml pairs GPUs 2 and 3 with 4 NVLinks, listed from both ends. Without GPU 3's
  // element GPU 2 would get NVLink bandwidth to a peer with none; with it twice, twice its links.
  const std::string xml = read_text_file(kDir + "node_4gpu_2nic.xml").value();
  const std::string back = R"(<nvlink target="0000:22:00.0" count="4" tclass="0x030200"/>)";
  const auto at = xml.find(back);
  ASSERT_NE(at, std::string::npos);
  auto one_sided = xml;
  one_sided.erase(at, back.size());
  auto c = import_nccl_topology(one_sided, "one_sided.xml");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.error().message.find("4 NVLink(s) to GPU 0000:23:00.0, which lists 0 back"), std::string::npos)
      << c.error().message;
  auto twice = xml;
  twice.insert(at, back);
  c = import_nccl_topology(twice, "twice.xml");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message.find("a second <nvlink> to 0000:22:00.0"), std::string::npos)
      << c.error().message;
  // Two GPUs at one bus id: the links could not say which of them they reach.
  auto same_bus = xml;
  const std::string bus = R"(<pci busid="0000:23:00.0")";
  same_bus.replace(same_bus.find(bus), bus.size(), R"(<pci busid="0000:22:00.0")");
  c = import_nccl_topology(same_bus, "same_bus.xml");
  ASSERT_FALSE(c.has_value());
  EXPECT_NE(c.error().message.find("bus id 0000:22:00.0 is GPU dev 2's too"), std::string::npos)
      << c.error().message;
}

struct BadFile {
  const char* file;
  ErrorCode code;
  const char* must_mention;
  friend void PrintTo(const BadFile& b, std::ostream* os) { *os << b.file; }
};

class TopoNcclXmlBad : public ::testing::TestWithParam<BadFile> {};

TEST_P(TopoNcclXmlBad, RefusedWithAClearError) {
  const auto c = load_nccl_topology_file(kDir + GetParam().file);
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, GetParam().code) << c.error().message;
  EXPECT_NE(c.error().message.find(GetParam().file), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find(GetParam().must_mention), std::string::npos) << c.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopoNcclXmlBad,
    ::testing::Values(BadFile{"malformed_syntax.xml", ErrorCode::kParse, "line 5: not well-formed XML"},
                      BadFile{"malformed_not_nccl.xml", ErrorCode::kInvalidArgument,
                              "line 1: <topology>: expected <system>"},
                      BadFile{"malformed_gpu_without_sm.xml", ErrorCode::kInvalidArgument,
                              "line 4: <gpu dev=\"0\">: attribute 'sm' missing"},
                      BadFile{"malformed_nic_speed.xml", ErrorCode::kParse,
                              "<net name=\"mlx5_0\">: attribute speed=\"fast\" is not a number"},
                      BadFile{"malformed_no_gpu.xml", ErrorCode::kInvalidArgument, "no <gpu> element"},
                      BadFile{"malformed_nvlink_to_missing_gpu.xml", ErrorCode::kNotFound,
                              "NVLink to GPU 0000:99:00.0, which is not in this machine"},
                      BadFile{"malformed_duplicate_gpu.xml", ErrorCode::kInvalidArgument,
                              "GPU dev 0 appears twice"},
                      BadFile{"no_such_file.xml", ErrorCode::kNotFound, "no such file"}));

}  // namespace
}  // namespace refit
