// Hostile cluster inputs (NCCL XML, cluster files, preset overrides), each a reproducer of a
// defect class the fuzzing campaign of issue 18 found: every one is now bad input (exit 2 in the
// CLI) that names the element, field or key, in bounded time and memory.
#include <chrono>

#include <fmt/format.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "error_code.h"
#include "refit/topology/cluster_json.h"
#include "refit/topology/nccl_xml.h"
#include "refit/topology/presets.h"

namespace refit {
namespace {

using testing::error_code;
using ::testing::HasSubstr;

// One GPU and one NIC; `net` is the <net> element's attributes, `links` the GPU's <nvlink>s.
std::string machine(const std::string& net, const std::string& links = "") {
  return R"(<system version="1"><cpu numaid="0">
  <pci busid="0000:11:00.0" class="0x030200"><gpu dev="0" sm="90">)" +
         links + R"(</gpu></pci>
  <pci busid="0000:12:00.0" class="0x020700"><nic><net name="mlx5_0" )" +
         net + R"(/></nic></pci>
</cpu></system>)";
}

TEST(HostileXml, TheTemplateMachineIsAccepted) {
  const auto c = import_nccl_topology(machine(R"(speed="400000" port="1")"), "m");
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_DOUBLE_EQ(c->nics()[0].bandwidth.gbps(), 47.0);  // 400 Gb/s x 47 / 400
}

TEST(HostileXml, AbsurdSpeedsAreOutOfRangeNamingTheElement) {
  // Once accepted and later crashing (5e-324), printing null (1e308) or a runtime error (nan).
  for (const char* speed : {"5e-324", "1e308", "nan", "inf", "-inf", "1", "1e300"}) {
    const auto c = import_nccl_topology(machine("speed=\"" + std::string(speed) + "\""), "m");
    EXPECT_TRUE(error_code(c) == ErrorCode::kOutOfRange) << speed;
    if (!c) {
      EXPECT_THAT(c.error().message, HasSubstr("<net name=\"mlx5_0\">")) << speed;
    }
  }
}

TEST(HostileXml, NonUtf8AttributesAreRefusedWithTheirLine) {
  // Once an abort when the cluster was written as JSON (topo --json).
  const auto c = import_nccl_topology(machine("speed=\"400000\" port=\"\xff\""), "m");
  EXPECT_EQ(error_code(c), ErrorCode::kParse);
  EXPECT_THAT(c.error().message, HasSubstr("line 3: byte"));
  EXPECT_THAT(c.error().message, HasSubstr("not valid UTF-8"));
}

TEST(HostileXml, ControlCharactersInAttributesAreRefusedNamingTheAttribute) {
  // A NIC's port (fuzz_nccl_xml found an escape there) becomes part of its name, which refit
  // prints and writes to cluster files, which refuse it.
  auto c = import_nccl_topology(machine("speed=\"400000\" port=\"&#27;[2J\""), "m");
  EXPECT_EQ(error_code(c), ErrorCode::kInvalidArgument);
  EXPECT_THAT(c.error().message,
              HasSubstr("<net name=\"mlx5_0\">: attribute 'port' holds a control character"));
  c = import_nccl_topology(R"(<system version="1"><cpu numaid="0&#10;"/></system>)", "m");
  EXPECT_THAT(c.error().message, HasSubstr("attribute 'numaid' holds a control character"));
}

TEST(HostileXml, AnNvlinkFromAGpuToItselfIsRefused) {
  const auto c = import_nccl_topology(
      machine(R"(speed="400000")", R"(<nvlink target="0000:11:00.0" count="4" tclass="0x030200"/>)"), "m");
  EXPECT_EQ(error_code(c), ErrorCode::kInvalidArgument);
  EXPECT_THAT(c.error().message, HasSubstr("an NVLink from GPU 0000:11:00.0 to itself"));
}

TEST(HostileXml, AHugeLinkCountIsRefusedBeforeItIsStored) {
  const auto c = import_nccl_topology(
      machine(R"(speed="400000")", R"(<nvlink target="0000:99:00.0" count="2000000000" tclass="0x030200"/>)"),
      "m");
  EXPECT_EQ(error_code(c), ErrorCode::kOutOfRange);
  EXPECT_THAT(c.error().message, HasSubstr("count=\"2000000000\" must be <= 64"));
}

TEST(HostileXml, DeepNestingIsRefusedInLinearTime) {
  // 200,000 nested <pci> once cost memory in the square of the depth (each level copied its
  // parent's chain); the walk now stops at level 64.
  std::string xml = R"(<system version="1"><cpu numaid="0">)";
  for (int i = 0; i < 200'000; ++i) xml += R"(<pci busid="0000:11:00.0">)";
  for (int i = 0; i < 200'000; ++i) xml += "</pci>";
  xml += "</cpu></system>";
  const auto c = import_nccl_topology(xml, "m");
  EXPECT_EQ(error_code(c), ErrorCode::kUnsupported);
  EXPECT_THAT(c.error().message, HasSubstr("nested deeper than 64 elements"));
}

TEST(HostileXml, LargeDumpsAreBoundedInDevicesAndLinearInTime) {
  // 2,000 GPUs, one per line: each GPU's name holds its line number, once counted from the start
  // of the text (quadratic); one machine holds at most 1024.
  std::string xml = "<system version=\"1\"><cpu numaid=\"0\">\n";
  for (int i = 0; i < 2000; ++i)
    xml += fmt::format("<pci busid=\"0000:{:02x}:{:02x}.0\"><gpu dev=\"{}\" sm=\"90\"/></pci>\n", i / 256,
                       i % 256, i);
  xml += "</cpu></system>";
  const auto c = import_nccl_topology(xml, "m");
  EXPECT_EQ(error_code(c), ErrorCode::kOutOfRange);
  EXPECT_THAT(c.error().message,
              HasSubstr("line 1026: <gpu dev=\"1024\">: more than 1024 GPUs in one machine"));
}

TEST(HostileXml, LinksOfOneGpuAreBounded) {
  std::string links;
  for (int i = 0; i < 20; ++i)  // 20 switches of 64 links each
    links += fmt::format(R"(<nvlink target="0000:{:02x}:00.0" count="64" tclass="0x068000"/>)", 0x80 + i);
  const auto c = import_nccl_topology(machine(R"(speed="400000")", links), "m");
  EXPECT_EQ(error_code(c), ErrorCode::kOutOfRange);
  EXPECT_THAT(c.error().message, HasSubstr("more than 1024 NVLinks"));
}

// The small cluster file of the tests, with `field` of GPU 0 (or NIC 0) set to `value`.
std::string cluster_with(const std::string& object, const std::string& field, const std::string& value) {
  std::string gpu =
      R"({"id": 0, "node": 0, "domain": 0, "nvlink_gbps": 370, "copy_gbps": 1450, "quantize_gbps": 0})";
  std::string nic =
      R"({"id": 0, "node": 0, "gbps": 47, "latency_us": 15, "chunk_overhead_us": 0, "transfer_overhead_us": 0,)"
      R"( "gpus": [0]})";
  std::string& target = object == "gpus" ? gpu : nic;
  const auto at = target.find("\"" + field + "\"");
  const auto end = target.find_first_of(",}", at);
  target = target.substr(0, at) + "\"" + field + "\": " + value + target.substr(end);
  return R"({"nvlink_latency_us": 5, "gpus": [)" + gpu +
         R"(], "domains": [{"id": 0, "gpus": [0]}], "nics": [)" + nic + "]}";
}

TEST(HostileClusterFile, TheTemplateIsAccepted) {
  const auto f = parse_cluster_json(cluster_with("gpus", "copy_gbps", "1450"));
  ASSERT_TRUE(f) << f.error().message;
}

TEST(HostileClusterFile, BandwidthsOutsideTheLimitsAreRefusedNamingTheField) {
  // 5e-324 GB/s made transfer times infinite; 1e308 overflowed to inf in bytes per second.
  struct Case {
    const char* object;
    const char* field;
    const char* value;
    const char* mention;
  };
  for (const auto& c : {Case{"gpus", "copy_gbps", "5e-324", "gpus[0].copy_gbps"},
                        Case{"gpus", "nvlink_gbps", "1e308", "gpus[0].nvlink_gbps"},
                        Case{"gpus", "quantize_gbps", "5e-324", "gpus[0].quantize_gbps"},
                        Case{"gpus", "quantize_gbps", "-1", "gpus[0].quantize_gbps"},
                        Case{"gpus", "quantize_gbps", R"({"mxfp8": 1e308})", "gpus[0].quantize_gbps.mxfp8"},
                        Case{"nics", "gbps", "1e-9", "nics[0].gbps"},
                        Case{"nics", "latency_us", "1e300", "nics[0].latency_us"},
                        Case{"nics", "chunk_overhead_us", "-1", "nics[0].chunk_overhead_us"},
                        Case{"nics", "chunk_overhead_us", "1e300", "nics[0].chunk_overhead_us"},
                        Case{"nics", "transfer_overhead_us", "-1", "nics[0].transfer_overhead_us"},
                        Case{"nics", "transfer_overhead_us", "1e300", "nics[0].transfer_overhead_us"}}) {
    const auto f = parse_cluster_json(cluster_with(c.object, c.field, c.value));
    EXPECT_EQ(error_code(f), ErrorCode::kOutOfRange) << c.field << "=" << c.value;
    if (!f) {
      EXPECT_THAT(f.error().message, HasSubstr(c.mention));
    }
  }
  // A GPU without NVLink (0) is still a cluster.
  EXPECT_TRUE(parse_cluster_json(cluster_with("gpus", "nvlink_gbps", "0")));
}

TEST(HostileClusterFile, NcclCostsOutOfRangeHalfGivenOrMisspeltAreRefusedNamingTheField) {
  // GPU 0 of the template with `"nccl_overhead_us": value` beside its quantize_gbps.
  const auto with = [](const std::string& value) {
    return parse_cluster_json(cluster_with("gpus", "quantize_gbps", R"(0, "nccl_overhead_us": )" + value));
  };
  for (const auto& [value, mention] : std::vector<std::pair<std::string, std::string>>{
           {R"({"per_op": -1, "per_step": 5})", "gpus[0].nccl_overhead_us.per_op is -1 us"},
           {R"({"per_op": 2, "per_step": 1e300})", "gpus[0].nccl_overhead_us.per_step"},
           {R"({"per_op": 2})", "gpus[0].nccl_overhead_us.per_step"},
           {R"({"per_op": 2, "per_step": 5, "per_chunk": 1})", "per_chunk"},
           {R"({"per_op": "fast", "per_step": 5})", "gpus[0].nccl_overhead_us.per_op"},
           {"5", "gpus[0].nccl_overhead_us"}}) {
    const auto f = with(value);
    ASSERT_FALSE(f) << value;
    EXPECT_THAT(f.error().message, HasSubstr(mention)) << value;
  }
  const auto measured = with(R"({"per_op": 2.25, "per_step": 5})");
  ASSERT_TRUE(measured) << measured.error().message;
  EXPECT_EQ(measured->cluster.gpu(GpuId{0}).nccl_costs,
            (NcclCosts{.per_op = Seconds{2.25e-6}, .per_step = Seconds{5e-6}}));
  // Absent: unmeasured.
  EXPECT_FALSE(
      parse_cluster_json(cluster_with("gpus", "copy_gbps", "1450"))->cluster.gpu(GpuId{0}).nccl_costs);
}

TEST(HostileClusterFile, AQuantizeRateForAnUnknownFormatOrOfNoNumberIsRefusedNamingIt) {
  // A rate per format's name: one that is no FP8 format refit knows, or no number, is named.
  const auto unknown = parse_cluster_json(cluster_with("gpus", "quantize_gbps", R"({"fp4": 1})"));
  ASSERT_FALSE(unknown);
  EXPECT_THAT(unknown.error().message, HasSubstr("gpus[0].quantize_gbps.fp4"));
  const auto text = parse_cluster_json(cluster_with("gpus", "quantize_gbps", R"({"mxfp8": "fast"})"));
  ASSERT_FALSE(text);
  EXPECT_THAT(text.error().message, HasSubstr("gpus[0].quantize_gbps.mxfp8"));
  // A format left out is unmeasured.
  const auto one = parse_cluster_json(cluster_with("gpus", "quantize_gbps", R"({"mxfp8": 2})"));
  ASSERT_TRUE(one) << one.error().message;
  const auto& rates = one->cluster.gpu(GpuId{0}).quantize_bandwidth;
  EXPECT_DOUBLE_EQ(of_scheme(rates, QuantScheme::kMxfp8).gbps(), 2);
  EXPECT_EQ(of_scheme(rates, QuantScheme::kFp8Block128).value, 0);
  // Written back as it was read: the measured format only.
  EXPECT_EQ(cluster_to_json(one->cluster)["gpus"][0]["quantize_gbps"].dump(), R"({"mxfp8":2.0})");
  // One rate for every format is named as the file names it.
  const auto bad = parse_cluster_json(cluster_with("gpus", "quantize_gbps", "-1"));
  ASSERT_FALSE(bad);
  EXPECT_THAT(bad.error().message, HasSubstr("gpus[0].quantize_gbps is -1 GB/s"));
}

TEST(HostileClusterFile, NumbersBeyondDoubleRangeAreParseErrors) {
  // Once an uncaught exception and abort.
  const auto f = parse_cluster_json(cluster_with("nics", "gbps", "1e309"));
  EXPECT_EQ(error_code(f), ErrorCode::kParse);
  EXPECT_THAT(f.error().message, HasSubstr("the cluster file: not valid JSON"));
}

TEST(HostileClusterFile, DuplicateKeysAreRefused) {
  const auto f = parse_cluster_json(R"({"name": "a", "name": "b", "gpus": []})");
  EXPECT_EQ(error_code(f), ErrorCode::kInvalidArgument);
  EXPECT_THAT(f.error().message, HasSubstr("name: key appears twice"));
}

TEST(HostileClusterFile, DeeplyNestedTypedFieldsAreRefusedNotPrinted) {
  // Once a stack overflow: the error for the wrong type printed the value recursively.
  const std::string deep(100'000, '[');
  const auto f = parse_cluster_json(R"({"name": )" + deep + std::string(100'000, ']') + "}");
  EXPECT_EQ(error_code(f), ErrorCode::kUnsupported);
  EXPECT_THAT(f.error().message, HasSubstr("name[0]"));
  const auto g = parse_cluster_json(R"({"name": [[[1]]]})");
  EXPECT_EQ(error_code(g), ErrorCode::kInvalidArgument);
  EXPECT_THAT(g.error().message, HasSubstr("name: expected a string, got an array of 1 elements"));
}

TEST(HostilePresets, CountsAreCappedBeforeTheClusterIsBuilt) {
  // nodes=2000000000 allocated gigabytes (and overflowed nodes x gpus_per_node) before failing.
  for (const char* spec :
       {"dgx-h100:nodes=2000000000", "dgx-h100:gpus_per_node=2000000", "cpu-host:infer_offset=99999999"}) {
    const auto c = make_preset_cluster(spec);
    EXPECT_EQ(error_code(c), ErrorCode::kOutOfRange) << spec;
    if (!c) {
      EXPECT_THAT(c.error().message, HasSubstr("must be <= 1048576")) << spec;
    }
  }
  // Each count alone within the cap, their product not: nodes x gpus_per_node GPUs.
  const auto c = make_preset_cluster("dgx-h100:nodes=1000000,gpus_per_node=8,nics_per_node=8");
  EXPECT_EQ(error_code(c), ErrorCode::kOutOfRange);
  EXPECT_THAT(c.error().message, HasSubstr("nodes x gpus_per_node = GPUs"));
}

TEST(HostilePresets, RankCountsAreCappedBeforeTheirSumOverflows) {
  // 2e9 + 2e9 ranks once wrapped in int32 and sized an 8-GPU cluster.
  const auto c =
      size_preset_to_job("dgx-h100", {.source_ranks = 2'000'000'000, .destination_ranks = 2'000'000'000});
  EXPECT_EQ(error_code(c), ErrorCode::kOutOfRange);
  EXPECT_THAT(c.error().message, HasSubstr("placement: 2000000000 training ranks, at most 1048576"));
}

TEST(HostilePresets, AMillionGpusAreBuiltAndCheckedInBoundedTime) {
  // Fuzzing finding (tests/data/fuzz/cli_values/finding_million_gpu_domain_timeout): one NVLink
  // domain of 910,216 GPUs, within the caps, took over 10 s under ASan because Cluster::make
  // formatted every GPU's error prefix before any error; 0.44 s in a release build now.
  const auto start = std::chrono::steady_clock::now();
  const auto c = make_preset_cluster("gb200-nvl72:gpus_per_domain=910216");
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(c) << c.error().message;
  EXPECT_EQ(c->gpus().size(), 910216u);
  EXPECT_LT(took.count(), 10.0);
}

TEST(HostilePresets, RatesAreFiniteAndInRange) {
  for (const char* spec : {"dgx-h100:nic_gbps=1e308", "dgx-h100:nvlink_gbps=5e-324", "dgx-h100:copy_gbps=nan",
                           "dgx-h100:latency_us=inf", "dgx-h100:oversubscription=1e9"}) {
    const auto c = make_preset_cluster(spec);
    EXPECT_EQ(error_code(c), ErrorCode::kOutOfRange) << spec;
  }
}

}  // namespace
}  // namespace refit
