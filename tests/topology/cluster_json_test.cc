#include "refit/topology/cluster_json.h"

#include <limits>

#include <gtest/gtest.h>

#include "error_code.h"

#include "refit/topology/nccl_xml.h"
#include "refit/topology/presets.h"

namespace refit {
namespace {

const std::string kDir = std::string(REFIT_TEST_DATA_DIR) + "/topology/";

RankPlacementOptions ranks(std::int32_t train, std::int32_t infer) {
  RankPlacementOptions o;
  o.source_ranks = train;
  o.destination_ranks = infer;
  return o;
}

// Dump -> text -> parse -> load must give the very same cluster and placement, bit for bit.
void expect_round_trip(const PlacedCluster& c) {
  const auto text = cluster_to_json(c.cluster(), &c.ranks()).dump();
  const auto back = parse_cluster_json(text);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_EQ(back->cluster, c.cluster()) << text;
  ASSERT_TRUE(back->ranks.has_value()) << text;
  EXPECT_EQ(*back->ranks, c.ranks()) << text;
}

PlacedCluster placed(Cluster cluster, const RankPlacementOptions& job) {
  auto ranks = RankMap::place(cluster, job).value();
  return PlacedCluster::make(std::move(cluster), std::move(ranks)).value();
}

class TopoJsonPresets : public ::testing::TestWithParam<std::string> {};

TEST_P(TopoJsonPresets, DumpThenLoadGivesTheSameCluster) {
  // Also with overrides whose figures are not round (nic_gbps=333 -> 39.1275 GB/s).
  for (const auto& spec : {GetParam(), GetParam() + ":nic_gbps=333,latency_us=12.3,oversubscription=1.5"}) {
    auto c = size_preset_to_job(spec, ranks(5, 7));
    ASSERT_TRUE(c.has_value()) << c.error().message;
    expect_round_trip(*c);
  }
}

INSTANTIATE_TEST_SUITE_P(Every, TopoJsonPresets, ::testing::ValuesIn(preset_names()));

TEST(TopoJson, ImportedClustersRoundTrip) {
  // NCCL imports carry NIC names, PCI bus ids and link-counted NVLink (18 x 20.6 = 370.8).
  for (const char* file : {"h100_8gpu_8nic.xml", "node_4gpu_2nic.xml", "node_storage_nics.xml"}) {
    auto c = load_nccl_topology_file(kDir + file, 12);
    ASSERT_TRUE(c.has_value()) << c.error().message;
    expect_round_trip(placed(std::move(*c), ranks(4, 8)));
  }
}

TEST(TopoJson, MeasuredOverheadsRoundTrip) {
  // As refit calibrate writes them: 10.37 us per chunk and 8.61 us per transfer on every NIC, kept
  // bit for bit.
  auto c = size_preset_to_job("cpu-host", ranks(2, 2));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  ClusterSpec spec = c->cluster().spec();
  for (auto& n : spec.nics) {
    n.chunk_overhead = Seconds{10.37e-6};
    n.transfer_overhead = Seconds{8.61e-6};
  }
  expect_round_trip(placed(Cluster::make(std::move(spec)).value(), ranks(2, 2)));
}

TEST(TopoJson, SubnormalLatenciesAndOverheadsRoundTrip) {
  // 1e-308 us is 1e-314 s, a subnormal double: dumping it once threw out of std::stod (exit 1,
  // "internal error: stod"), though loading took it.
  auto c = size_preset_to_job("cpu-host", ranks(2, 2));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  ClusterSpec spec = c->cluster().spec();
  spec.nvlink_latency = Seconds{1e-314};
  for (auto& n : spec.nics) {
    n.latency = Seconds{1e-314};
    n.chunk_overhead = Seconds{2e-314};
    n.transfer_overhead = Seconds{std::numeric_limits<double>::denorm_min()};
  }
  expect_round_trip(placed(Cluster::make(std::move(spec)).value(), ranks(2, 2)));
}

TEST(TopoJson, MeasuredNcclCostsRoundTrip) {
  // As refit topo --discover --measure writes them: 2.235 us per send or receive and 5.02 us per
  // step on every GPU, kept bit for bit; a GPU left unmeasured stays so.
  auto c = size_preset_to_job("dgx-h100", ranks(4, 4));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  ClusterSpec spec = c->cluster().spec();
  for (auto& g : spec.gpus)
    g.nccl_costs = g.id.value == 3
                       ? std::nullopt
                       : std::optional(NcclCosts{.per_op = Seconds{2.235e-6}, .per_step = Seconds{5.02e-6}});
  const auto json = cluster_to_json(Cluster::make(spec).value());
  EXPECT_NEAR(json["gpus"][0]["nccl_overhead_us"]["per_op"].get<double>(), 2.235, 1e-12);
  EXPECT_NEAR(json["gpus"][0]["nccl_overhead_us"]["per_step"].get<double>(), 5.02, 1e-12);
  EXPECT_FALSE(json["gpus"][3].contains("nccl_overhead_us"));
  expect_round_trip(placed(Cluster::make(std::move(spec)).value(), ranks(4, 4)));
}

TEST(TopoJson, ACalibratedCacheRoundTrips) {
  // As refit calibrate writes it: node 0 runs a refit of at most 16 MiB of shards at 11.52 GB/s,
  // 162.3 us, 3.6 us per chunk, 0.4 us per transfer and copies at 14.69 GB/s; a capacity past 2 GiB
  // is kept too.
  auto c = size_preset_to_job("cpu-host", ranks(2, 2));
  ASSERT_TRUE(c.has_value()) << c.error().message;
  ClusterSpec spec = c->cluster().spec();
  for (const std::int64_t capacity : {std::int64_t{16} << 20, std::int64_t{5} << 30}) {
    spec.caches = {{.node = 0,
                    .capacity = Bytes{capacity},
                    .nic_bandwidth = BytesPerSecond::from_gbps(11.52),
                    .nic_latency = Seconds{162.3e-6},
                    .chunk_overhead = Seconds{3.6e-6},
                    .transfer_overhead = Seconds{0.4e-6},
                    .copy_bandwidth = BytesPerSecond::from_gbps(14.69)}};
    expect_round_trip(placed(Cluster::make(spec).value(), ranks(2, 2)));
  }
}

TEST(TopoJson, ACalibratedHostsFileLoadsWithItsCache) {
  // tests/data/topology/calibrated_host.json, as refit calibrate wrote it on the project's VM.
  auto file = load_cluster_file(kDir + "calibrated_host.json");
  ASSERT_TRUE(file.has_value()) << file.error().message;
  const auto& caches = file->cluster.spec().caches;
  ASSERT_EQ(caches.size(), 1u);
  EXPECT_EQ(caches[0].node, 0);
  EXPECT_EQ(caches[0].capacity.value, 16 << 20);
  EXPECT_DOUBLE_EQ(caches[0].nic_bandwidth.gbps(), 11.52);
  EXPECT_NEAR(caches[0].chunk_overhead.value, 3.56e-6, 1e-15);
  EXPECT_DOUBLE_EQ(caches[0].copy_bandwidth.gbps(), 14.69);
}

TEST(TopoJson, TheDocumentedExampleLoads) {
  auto file = load_cluster_file(kDir + "cluster_small.json");
  ASSERT_TRUE(file.has_value()) << file.error().message;
  const Cluster& c = file->cluster;
  EXPECT_EQ(c.name(), "two-small-nodes");
  EXPECT_EQ(c.node_count(), 2);
  EXPECT_EQ(c.fabric().oversubscription, 2.0);
  EXPECT_DOUBLE_EQ(c.nics()[1].bandwidth.gbps(), 47.0);
  EXPECT_DOUBLE_EQ(c.nics()[1].latency.value, 15e-6);
  EXPECT_EQ(c.gpu(GpuId{0}).pci_bus_id, "0000:18:00.0");
  // The file's own placement, read apart from the hardware: 2 training ranks on GPUs 0-1,
  // inference on 2-3.
  ASSERT_TRUE(file->ranks.has_value());
  EXPECT_EQ(file->ranks->rank_count(), 4);
  EXPECT_EQ(file->ranks->source_ranks(), 2);
  EXPECT_EQ(c.domain_of(file->ranks->gpu_of(Rank{2})), 1);
}

TEST(TopoJson, OtherRanksCanBePlacedOnTheFilesHardware) {
  // 1 training rank on GPU 0, 1 inference rank right after it on GPU 1; 8 ranks do not fit.
  auto file = load_cluster_file(kDir + "cluster_small.json");
  ASSERT_TRUE(file.has_value()) << file.error().message;
  const auto ranks_1_1 = RankMap::place(file->cluster, ranks(1, 1));
  ASSERT_TRUE(ranks_1_1.has_value());
  EXPECT_EQ(ranks_1_1->gpu_of(Rank{1}), GpuId{1});
  EXPECT_EQ(testing::error_code(RankMap::place(file->cluster, ranks(4, 4))), ErrorCode::kMismatch);
}

TEST(TopoJson, AFileWithoutPlacementIsHardwareOnly) {
  auto file = load_cluster_file(kDir + "cluster_small.json");
  ASSERT_TRUE(file.has_value());
  const auto text = cluster_to_json(file->cluster).dump();
  EXPECT_EQ(text.find("placement"), std::string::npos) << text;
  const auto back = parse_cluster_json(text);
  ASSERT_TRUE(back.has_value()) << back.error().message;
  EXPECT_FALSE(back->ranks.has_value());
  EXPECT_EQ(back->cluster, file->cluster);
}

TEST(TopoJson, MissingFileIsNotFound) {
  auto c = load_cluster_file(kDir + "no_such_cluster.json");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, ErrorCode::kNotFound);
  EXPECT_NE(c.error().message.find("no_such_cluster.json"), std::string::npos);
}

struct BadJson {
  const char* name;
  ErrorCode code;
  void (*mutate)(nlohmann::json&);
  const char* must_mention;
  friend void PrintTo(const BadJson& b, std::ostream* os) { *os << b.name; }
};

class TopoJsonBad : public ::testing::TestWithParam<BadJson> {};

TEST_P(TopoJsonBad, RefusedNamingTheJsonPath) {
  auto c = load_cluster_file(kDir + "cluster_small.json");
  ASSERT_TRUE(c.has_value());
  nlohmann::json j = nlohmann::json::parse(cluster_to_json(c->cluster, &*c->ranks).dump());
  GetParam().mutate(j);
  const auto back = cluster_from_json(j);
  ASSERT_FALSE(back.has_value());
  EXPECT_EQ(back.error().code, GetParam().code) << back.error().message;
  EXPECT_NE(back.error().message.find(GetParam().must_mention), std::string::npos) << back.error().message;
}

INSTANTIATE_TEST_SUITE_P(Cases, TopoJsonBad,
                         ::testing::Values(BadJson{"missing_node", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) { j["gpus"][3].erase("node"); },
                                                   "gpus[3].node: missing"},
                                           BadJson{"string_bandwidth", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) {
                                                     j["gpus"][0]["nvlink_gbps"] = "fast";
                                                   },
                                                   "gpus[0].nvlink_gbps: expected a number, got \"fast\""},
                                           BadJson{"negative_memory", ErrorCode::kOutOfRange,
                                                   [](nlohmann::json& j) { j["gpus"][2]["memory_gb"] = -80; },
                                                   "gpus[2].memory_gb: must be a size in GB within [0, 1e6], "
                                                   "got -80"},
                                           BadJson{"float_node", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) { j["gpus"][1]["node"] = 0.5; },
                                                   "gpus[1].node: expected an integer, got 0.5"},
                                           BadJson{"typo", ErrorCode::kNotFound,
                                                   [](nlohmann::json& j) { j["nics"][0]["gpbs"] = 1; },
                                                   "nics[0].gpbs: unknown field"},
                                           BadJson{"gpu_in_two_domains", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) {
                                                     j["domains"][1]["gpus"].push_back(0);
                                                   },
                                                   "domains[1].gpus[2]: GPU 0 is already in domain 0"},
                                           BadJson{"nic_to_missing_gpu", ErrorCode::kNotFound,
                                                   [](nlohmann::json& j) { j["nics"][1]["gpus"][0] = 9; },
                                                   "nics[1].gpus[0]: GPU 9 does not exist"},
                                           BadJson{"nic_on_other_node", ErrorCode::kMismatch,
                                                   [](nlohmann::json& j) { j["nics"][1]["gpus"][0] = 0; },
                                                   "nics[1].gpus[0]: GPU 0 is on node 0"},
                                           // Once kept the first NIC and ignored the second (a 10^6 GB/s NIC
                                           // changed nothing).
                                           BadJson{"gpu_under_two_nics", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) {
                                                     auto second = j["nics"][0];
                                                     second["id"] = 2;
                                                     second["gpus"] = nlohmann::json::array({1});
                                                     j["nics"].push_back(second);
                                                   },
                                                   "nics[2].gpus[0]: GPU 1 is already served by nics[0]"},
                                           // Once planned over NVLink, then refused by the simulator alone.
                                           BadJson{"no_nvlink_in_a_shared_domain",
                                                   ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) { j["gpus"][1]["nvlink_gbps"] = 0; },
                                                   "gpus[1].nvlink_gbps is 0 in domain 0 of 2 GPUs: a GPU "
                                                   "without NVLink is a domain of its own"},
                                           BadJson{"no_latency", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) { j.erase("nvlink_latency_us"); },
                                                   "nvlink_latency_us: missing"},
                                           BadJson{"gpus_not_array", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) { j["gpus"] = 3; },
                                                   "gpus: expected an array"},
                                           BadJson{"bad_oversubscription", ErrorCode::kOutOfRange,
                                                   [](nlohmann::json& j) {
                                                     j["fabric"]["oversubscription"] = 0.5;
                                                   },
                                                   "fabric.oversubscription"},
                                           BadJson{"placement_to_missing_gpu", ErrorCode::kNotFound,
                                                   [](nlohmann::json& j) {
                                                     j["placement"]["rank_to_gpu"][3] = 4;
                                                   },
                                                   "placement: rank_to_gpu[3]: GPU 4 does not exist"},
                                           BadJson{"cache_typo", ErrorCode::kNotFound,
                                                   [](nlohmann::json& j) {
                                                     j["caches"] = {{{"node", 0},
                                                                     {"capacity_bytes", 1},
                                                                     {"nic_gbps", 1},
                                                                     {"latency_us", 1},
                                                                     {"copy_gbps", 1},
                                                                     {"capacity", 2}}};
                                                   },
                                                   "caches[0].capacity: unknown field"},
                                           BadJson{"cache_without_capacity", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) {
                                                     j["caches"] = {{{"node", 0},
                                                                     {"nic_gbps", 1},
                                                                     {"latency_us", 1},
                                                                     {"copy_gbps", 1}}};
                                                   },
                                                   "caches[0].capacity_bytes: missing"},
                                           BadJson{"cache_of_no_node", ErrorCode::kNotFound,
                                                   [](nlohmann::json& j) {
                                                     j["caches"] = {{{"node", 7},
                                                                     {"capacity_bytes", 1},
                                                                     {"nic_gbps", 1},
                                                                     {"latency_us", 1},
                                                                     {"copy_gbps", 1}}};
                                                   },
                                                   "caches[0].node: no GPU is on node 7"},
                                           BadJson{"assumption_not_a_sentence", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) {
                                                     j["assumptions"] = {"copies at 10 GB/s", 3};
                                                   },
                                                   "assumptions[1]: must be a string, got number"},
                                           BadJson{
                                               "assumption_empty", ErrorCode::kOutOfRange,
                                               [](nlohmann::json& j) { j["assumptions"] = {""}; },
                                               "assumptions[0]: a sentence of 1 to 1000 characters, got 0"},
                                           BadJson{"assumption_too_long", ErrorCode::kOutOfRange,
                                                   [](nlohmann::json& j) {
                                                     j["assumptions"] = {std::string(1001, 'x')};
                                                   },
                                                   "assumptions[0]: a sentence of 1 to 1000 characters, got "
                                                   "1001"},
                                           BadJson{"assumption_with_an_escape", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) {
                                                     j["assumptions"] = {"copies \x1b[2J assumed"};
                                                   },
                                                   "assumptions[0]: a control character"},
                                           BadJson{"too_many_assumptions", ErrorCode::kOutOfRange,
                                                   [](nlohmann::json& j) {
                                                     j["assumptions"] =
                                                         std::vector<std::string>(65, "assumed");
                                                   },
                                                   "assumptions: at most 64 sentences, got 65"},
                                           BadJson{"not_an_object", ErrorCode::kInvalidArgument,
                                                   [](nlohmann::json& j) { j = nlohmann::json::array(); },
                                                   "the cluster file: expected an object, got []"}));

TEST(TopoJson, SyntaxErrorsGiveThePosition) {
  const auto c = parse_cluster_json("{\n  \"gpus\": [,]\n}");
  ASSERT_FALSE(c.has_value());
  EXPECT_EQ(c.error().code, ErrorCode::kParse);
  EXPECT_NE(c.error().message.find("not valid JSON"), std::string::npos) << c.error().message;
  EXPECT_NE(c.error().message.find("line 2"), std::string::npos) << c.error().message;
}

}  // namespace
}  // namespace refit
