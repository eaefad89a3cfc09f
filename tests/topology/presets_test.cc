#include "refit/topology/presets.h"

#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/topology/measured_kernels.h"

namespace refit {
namespace {

RankPlacementOptions ranks(std::int32_t train, std::int32_t infer) {
  RankPlacementOptions o;
  o.source_ranks = train;
  o.destination_ranks = infer;
  return o;
}

// The preset sized to a job, with the job placed on it.
PlacedCluster sized(std::string_view spec, RankPlacementOptions placement = {}) {
  auto c = size_preset_to_job(spec, placement);
  EXPECT_TRUE(c.has_value()) << spec << ": " << (c ? "" : c.error().message);
  return std::move(c).value();
}

Cluster preset(std::string_view spec, RankPlacementOptions placement = {}) {
  return sized(spec, std::move(placement)).cluster();
}

TEST(TopoPresets, DgxH100SizedToTheRanks) {
  // 8 training + 8 inference ranks need 16 GPUs = 2 nodes of 8; each node is an NVLink domain
  // with 8 rail NICs of 400 Gb/s x 47/400 = 47 GB/s, so 8 x 47 = 376 GB/s per domain. Packing and
  // FP8 at refit's kernels' rates on an H100 (measured_kernels.cc): copies at 1122 GB/s, quantize
  // reads 1970 (fp8-block128) and 1577 (mxfp8) GB/s of bf16, and refit's NCCL executor costs
  // what it measured there, nothing assumed.
  const auto placed = sized("dgx-h100", ranks(8, 8));
  const auto& c = placed.cluster();
  EXPECT_EQ(c.node_count(), 2);
  ASSERT_EQ(c.gpus().size(), 16u);
  ASSERT_EQ(c.domains().size(), 2u);
  ASSERT_EQ(c.nics().size(), 16u);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).nvlink_bandwidth.gbps(), 370.0);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).copy_bandwidth.gbps(), 1122.0);
  EXPECT_DOUBLE_EQ(of_scheme(c.gpu(GpuId{0}).quantize_bandwidth, QuantScheme::kFp8Block128).gbps(), 1970.0);
  EXPECT_DOUBLE_EQ(of_scheme(c.gpu(GpuId{0}).quantize_bandwidth, QuantScheme::kMxfp8).gbps(), 1577.0);
  EXPECT_EQ(c.gpu(GpuId{0}).nccl_costs, reference_kernels().nccl);
  EXPECT_TRUE(c.spec().assumptions.empty());
  EXPECT_DOUBLE_EQ(c.nics()[0].bandwidth.gbps(), 47.0);
  EXPECT_DOUBLE_EQ(c.nics()[0].latency.value, 15e-6);
  EXPECT_DOUBLE_EQ(c.nvlink_latency().value, 5e-6);
  EXPECT_DOUBLE_EQ(c.domain_nic_bandwidth(1).gbps(), 376.0);
  // Rail-optimised: GPU g uses NIC g; training on GPUs 0-7 (domain 0), inference on 8-15.
  EXPECT_EQ(c.nic_of(GpuId{13}), 13);
  EXPECT_EQ(placed.domain_of(Rank{7}), 0);
  EXPECT_EQ(placed.domain_of(Rank{8}), 1);
  EXPECT_EQ(placed.gpu_of(Rank{15}), GpuId{15});
  EXPECT_EQ(c.fabric().oversubscription, 1.0);
}

TEST(TopoPresets, RoundsUpToWholeNodesAndHasAtLeastOne) {
  // 9 ranks need 2 nodes of 8; no rank at all still gives one node.
  EXPECT_EQ(preset("dgx-h100", ranks(9, 0)).node_count(), 2);
  EXPECT_EQ(preset("dgx-h100").node_count(), 1);
  EXPECT_EQ(sized("dgx-h100").ranks().rank_count(), 0);
  EXPECT_EQ(make_preset_cluster("dgx-h100", 9)->node_count(), 2);
}

TEST(TopoPresets, Gb200SizedInWholeRacks) {
  // 16 + 16 ranks fit in one NVL72 domain: 72 GPUs = 18 trays of 4, one 400G NIC per GPU.
  const auto c = preset("gb200-nvl72", ranks(16, 16));
  EXPECT_EQ(c.gpus().size(), 72u);
  EXPECT_EQ(c.node_count(), 18);
  ASSERT_EQ(c.domains().size(), 1u);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).nvlink_bandwidth.gbps(), 746.0);
  EXPECT_DOUBLE_EQ(c.nics()[0].bandwidth.gbps(), 47.0);
  EXPECT_EQ(c.gpu(GpuId{5}).node, 1);  // 4 GPUs per tray
}

TEST(TopoPresets, Gb200With64GpuDomains) {
  // 64 + 64 ranks on 64-GPU domains: 2 domains of 16 trays; inference fills domain 1.
  const auto placed = sized("gb200-nvl72:gpus_per_domain=64,nic_gbps=400", ranks(64, 64));
  const auto& c = placed.cluster();
  EXPECT_EQ(c.gpus().size(), 128u);
  EXPECT_EQ(c.node_count(), 32);
  ASSERT_EQ(c.domains().size(), 2u);
  EXPECT_EQ(placed.domain_of(Rank{63}), 0);
  EXPECT_EQ(placed.domain_of(Rank{64}), 1);
  EXPECT_DOUBLE_EQ(c.domain_nic_bandwidth(0).gbps(), 64 * 47.0);
  EXPECT_EQ(c.name(), "gb200-nvl72:gpus_per_domain=64,nic_gbps=400");
}

TEST(TopoPresets, Gb300HasXdrNics) {
  // 800 Gb/s x 47/400 = 94 GB/s.
  EXPECT_DOUBLE_EQ(preset("gb300-nvl72").nics()[0].bandwidth.gbps(), 94.0);
}

TEST(TopoPresets, DgxB200AndH200Figures) {
  // refit's copy kernel has run on an H100 only (1122 GB/s at an HBM line of 3.35 TB/s), so other
  // GPUs copy at that scaled by their HBM line rate, and say so:
  // B200: NVLink5 746 GB/s; HBM3e 8 TB/s: 1122 x 8 / 3.35 = 2679.4 -> 2679 GB/s of copies.
  // H200: HBM3e 4.8 TB/s: 1122 x 4.8 / 3.35 = 1607.6 -> 1608 GB/s.
  // Neither has a quantize rate of its own (0: the simulator derives one from the copy rate) nor
  // NCCL executor costs (the simulator charges the H100's and says so).
  const auto b200 = preset("dgx-b200");
  const auto h200 = preset("dgx-h200");
  EXPECT_DOUBLE_EQ(b200.gpu(GpuId{0}).nvlink_bandwidth.gbps(), 746.0);
  EXPECT_DOUBLE_EQ(b200.gpu(GpuId{0}).copy_bandwidth.gbps(), 2679.0);
  EXPECT_DOUBLE_EQ(h200.gpu(GpuId{0}).copy_bandwidth.gbps(), 1608.0);
  EXPECT_EQ(h200.gpu(GpuId{0}).quantize_bandwidth, QuantizeRates{});
  EXPECT_FALSE(h200.gpu(GpuId{0}).nccl_costs.has_value());
  EXPECT_FALSE(b200.gpu(GpuId{0}).nccl_costs.has_value());
  ASSERT_EQ(h200.spec().assumptions.size(), 1u);
  EXPECT_EQ(h200.spec().assumptions[0],
            "pack/unpack on the H200 is charged at 1608 GB/s: refit's copy kernel has no run on that GPU "
            "(tests/gpu/run.sh), so the 1122 GB/s it copied on the NVIDIA H100 80GB HBM3 (2026-12-06) is "
            "scaled by HBM line rate (4800 of 3350 GB/s)");
}

TEST(TopoPresets, ACopyRateGivenIsNotAssumed) {
  // copy_gbps names the figure: the preset's scaled one, and its note, are gone.
  const auto c = preset("dgx-h200:copy_gbps=1500");
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).copy_bandwidth.gbps(), 1500.0);
  EXPECT_TRUE(c.spec().assumptions.empty());
}

TEST(TopoPresets, GpuMemoryIsTheDatasheetCapacity) {
  // Decimal GB (docs/hardware.md, "GPU memory"): NeMo RL sizes its refit buffers by it.
  EXPECT_EQ(preset("dgx-h100").gpu(GpuId{0}).memory.value, 80'000'000'000);
  EXPECT_EQ(preset("dgx-h200").gpu(GpuId{0}).memory.value, 141'000'000'000);
  EXPECT_EQ(preset("dgx-b200").gpu(GpuId{0}).memory.value, 180'000'000'000);
  EXPECT_EQ(preset("gb200-nvl72").gpu(GpuId{0}).memory.value, 186'000'000'000);
  EXPECT_EQ(preset("gb300-nvl72").gpu(GpuId{0}).memory.value, 288'000'000'000);
}

TEST(TopoPresets, OverridesChangeTheirFigure) {
  // nic_gbps=200 -> 200 x 47/400 = 23.5 GB/s; the others are taken as given.
  const auto c = preset(
      "dgx-h100:nic_gbps=200,nvlink_gbps=400,copy_gbps=1000,latency_us=20,"
      "nvlink_latency_us=3,oversubscription=2,chunk_overhead_us=7.5,transfer_overhead_us=12.5");
  EXPECT_DOUBLE_EQ(c.nics()[0].bandwidth.gbps(), 23.5);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).nvlink_bandwidth.gbps(), 400.0);
  EXPECT_DOUBLE_EQ(c.gpu(GpuId{0}).copy_bandwidth.gbps(), 1000.0);
  EXPECT_DOUBLE_EQ(c.nics()[0].latency.value, 20e-6);
  EXPECT_DOUBLE_EQ(c.nvlink_latency().value, 3e-6);
  EXPECT_EQ(c.fabric().oversubscription, 2.0);
  EXPECT_DOUBLE_EQ(c.nics()[0].chunk_overhead.value, 7.5e-6);
  EXPECT_DOUBLE_EQ(c.nics()[0].transfer_overhead.value, 12.5e-6);
  EXPECT_EQ(preset("dgx-h100").nics()[0].chunk_overhead.value, 0);  // no preset measures one
  EXPECT_EQ(preset("dgx-h100").nics()[0].transfer_overhead.value, 0);
}

TEST(TopoPresets, NodeAndDomainShapes) {
  // 4 GPUs per node: the domain follows the node (4). 4 GPUs per domain in 8-GPU nodes: 2
  // domains per node. 4 NICs per node: each serves 2 GPUs.
  EXPECT_EQ(preset("dgx-h100:gpus_per_node=4", ranks(8, 0)).domains().size(), 2u);
  const auto halves = preset("dgx-h100:gpus_per_domain=4", ranks(8, 0));
  EXPECT_EQ(halves.node_count(), 1);
  EXPECT_EQ(halves.domains().size(), 2u);
  const auto shared = preset("dgx-h100:nics_per_node=4");
  ASSERT_EQ(shared.nics().size(), 4u);
  EXPECT_EQ(shared.nics()[1].gpus, (std::vector<GpuId>{GpuId{2}, GpuId{3}}));
  EXPECT_EQ(preset("dgx-h100:nodes=3").node_count(), 3);
}

TEST(TopoPresets, InferOffsetPlacesAndSizes) {
  // Inference from GPU 16: 8 ranks on GPUs 16-23 need 24 GPUs = 3 nodes.
  const auto c = sized("dgx-h100:infer_offset=16", ranks(8, 8));
  EXPECT_EQ(c.cluster().node_count(), 3);
  EXPECT_EQ(c.gpu_of(Rank{8}), GpuId{16});
  EXPECT_EQ(c.domain_of(Rank{8}), 2);
}

// infer_offset places a job: the preset alone describes hardware and refuses it.
TEST(TopoPresets, TheHardwareAloneRefusesAJobKey) {
  const auto c = make_preset_cluster("dgx-h100:infer_offset=16");
  ASSERT_FALSE(c);
  EXPECT_EQ(c.error().code, ErrorCode::kInvalidArgument);
  EXPECT_NE(c.error().message.find("infer_offset places a job"), std::string::npos) << c.error().message;
}

// Hardware and job apart: one job's rank map, placed on two systems of the same size, differs
// only in the hardware under it (8 + 8 ranks on 2 DGX H100 nodes or on 2 DGX B200 nodes).
TEST(TopoPresets, TheSameJobGoesOnOtherHardware) {
  const auto h100 = make_preset_cluster("dgx-h100", 16).value();
  const auto b200 = make_preset_cluster("dgx-b200", 16).value();
  const auto on_h100 = RankMap::place(h100, ranks(8, 8)).value();
  const auto on_b200 = RankMap::place(b200, ranks(8, 8)).value();
  EXPECT_EQ(on_h100, on_b200);
  const auto placed = PlacedCluster::make(b200, on_h100).value();
  EXPECT_DOUBLE_EQ(placed.cluster().gpu(placed.gpu_of(Rank{9})).nvlink_bandwidth.gbps(), 746.0);
  // A rank map made for a larger cluster does not fit a smaller one.
  const auto big = make_preset_cluster("dgx-h100", 24).value();
  const auto spread =
      RankMap::place(big, {.source_ranks = 8, .destination_ranks = 8, .destination_offset = 16}).value();
  EXPECT_EQ(PlacedCluster::make(h100, spread).error().code, ErrorCode::kNotFound);
}

TEST(TopoPresets, CpuHostHasOneDevicePerRank) {
  // 3 + 2 processes on one node, one shared-memory domain, one loopback NIC serving all five.
  const auto c = preset("cpu-host", ranks(3, 2));
  EXPECT_EQ(c.node_count(), 1);
  EXPECT_EQ(c.gpus().size(), 5u);
  ASSERT_EQ(c.domains().size(), 1u);
  ASSERT_EQ(c.nics().size(), 1u);
  EXPECT_EQ(c.nics()[0].name, "loopback");
  EXPECT_EQ(c.nics()[0].gpus.size(), 5u);
  EXPECT_EQ(preset("cpu-host").gpus().size(), 1u);
}

TEST(TopoPresets, CpuHostQuantizesAtRefitsCpuQuantizer) {
  // Each process quantizes on one core (hardware_constants.h): 1.13 and 1.12 GB/s of bf16, as
  // refit calibrate measured it, not the 10 GB/s copy x 1970 / 1122 = 17.6 GB/s (x 1577 / 1122 =
  // 14.1 for mxfp8) that the GPU kernels' ratios would give.
  const auto c = preset("cpu-host", ranks(2, 2));
  for (const auto& g : c.gpus()) {
    EXPECT_DOUBLE_EQ(of_scheme(g.quantize_bandwidth, QuantScheme::kFp8Block128).gbps(), 1.13);
    EXPECT_DOUBLE_EQ(of_scheme(g.quantize_bandwidth, QuantScheme::kMxfp8).gbps(), 1.12);
  }
}

TEST(TopoPresets, PresetNamesAndKeysAreListed) {
  EXPECT_EQ(preset_names(), (std::vector<std::string>{"dgx-h100", "dgx-h200", "dgx-b200", "gb200-nvl72",
                                                      "gb300-nvl72", "cpu-host"}));
  EXPECT_GE(preset_keys().size(), 9u);
}

struct BadSpec {
  const char* spec;
  ErrorCode code;
  const char* must_mention;
  friend void PrintTo(const BadSpec& b, std::ostream* os) { *os << b.spec; }
};

class TopoPresetsBad : public ::testing::TestWithParam<BadSpec> {};

TEST_P(TopoPresetsBad, RefusedNamingTheKey) {
  const auto c = size_preset_to_job(GetParam().spec, ranks(8, 8));
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, GetParam().code) << c.error().message;
  EXPECT_NE(c.error().message.find(GetParam().must_mention), std::string::npos) << c.error().message;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, TopoPresetsBad,
    ::testing::Values(
        BadSpec{"dgx-h1000", ErrorCode::kNotFound, "unknown preset 'dgx-h1000'"},
        BadSpec{"gb200-nvl72:foo=1", ErrorCode::kNotFound, "unknown key 'foo' (valid keys: nodes,"},
        BadSpec{"gb200-nvl72:gpus_per_domain=x", ErrorCode::kParse, "gpus_per_domain=x: expected an integer"},
        BadSpec{"gb200-nvl72:gpus_per_domain=6", ErrorCode::kInvalidArgument,
                "gpus_per_domain=6 and gpus_per_node=4"},
        BadSpec{"dgx-h100:nodes=0", ErrorCode::kOutOfRange, "nodes=0: must be >= 1"},
        BadSpec{"dgx-h100:nodes=1", ErrorCode::kMismatch, "too few"},
        BadSpec{"dgx-h100:oversubscription=0.5", ErrorCode::kOutOfRange,
                "oversubscription=0.5: must be >= 1"},
        BadSpec{"dgx-h100:nic_gbps=-400", ErrorCode::kOutOfRange, "nic_gbps=-400: must be >= 0.01"},
        BadSpec{"dgx-h100:nic_gbps=0", ErrorCode::kOutOfRange, "nic_gbps=0: must be >= 0.01"},
        BadSpec{"dgx-h100:nvlink_gbps=-1", ErrorCode::kOutOfRange, "nvlink_gbps=-1: must be >= 0.001"},
        BadSpec{"dgx-h100:nic_gbps=inf", ErrorCode::kOutOfRange, "nic_gbps=inf: expected a number"},
        BadSpec{"dgx-h100:nodes=99999999999", ErrorCode::kOutOfRange,
                "nodes=99999999999: expected an integer"},
        BadSpec{"dgx-h100:nics_per_node=3", ErrorCode::kInvalidArgument, "nics_per_node=3"},
        BadSpec{"dgx-h100:nodes=2,nodes=3", ErrorCode::kInvalidArgument, "key 'nodes' is given twice"},
        BadSpec{"dgx-h100:nodes", ErrorCode::kParse, "'nodes': expected key=value"},
        BadSpec{"dgx-h100:", ErrorCode::kParse, "expected key=value"}));

}  // namespace
}  // namespace refit
