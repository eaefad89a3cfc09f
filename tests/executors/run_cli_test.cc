// `refit run` as users start it: mpirun with 4 to 8 processes on this machine (shared memory and
// loopback only). Every strategy moves tiny HF models and random manifests and verifies every
// destination element. Faults: run_faults_test.cc; long runs: the soak test below.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "mpirun.h"
#include "random_problems.h"
#include "refit/models/manifest.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";

using testing::refit_run;

void expect_verified(const testing::ShellResult& r, std::string_view strategy, int ranks) {
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << "stdout is not one JSON object: " << r.out;
  EXPECT_EQ(j["executor"], "ucx");
  EXPECT_EQ(j["strategy"], strategy);
  EXPECT_EQ(j["ranks"], ranks);
  EXPECT_GT(j["bytes"].get<std::int64_t>(), 0);
  EXPECT_GT(j["seconds"].get<double>(), 0.0);
  EXPECT_GT(j["gbps"].get<double>(), 0.0);
  EXPECT_EQ(j["verified"], true);
}

struct ModelCase {
  const char* config;
  const char* train;
  const char* infer;
  int ranks;
};

// qwen3_moe: Megatron tp=2,ep=2,etp=1 (2 ranks) -> vLLM tp=2,dp=2 (4 ranks);
// llama: Megatron tp=2,pp=2 (4 ranks) -> vLLM tp=4 (4 ranks).
constexpr ModelCase kCases[] = {{"tiny-qwen3-moe.json", "tp=2,ep=2,etp=1", "tp=2,dp=2", 6},
                                {"tiny-llama.json", "tp=2,pp=2", "tp=4", 8}};
constexpr const char* kStrategies[] = {"refit", "direct", "m2n-ring", "gather-broadcast"};

class RunModel : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Odd strategies run with NVLink domains of two processes, so relays and "network" hops happen.
TEST_P(RunModel, EveryStrategyIsVerified) {
  const auto& [model, strategy] = GetParam();
  const ModelCase& c = kCases[model];
  const std::string cluster = strategy % 2 == 0 ? "cpu-host" : "cpu-host:gpus_per_domain=2";
  const auto r = refit_run(c.ranks, "--model " + kModels + c.config + " --train " + c.train + " --infer " +
                                        c.infer + " --strategy " + kStrategies[strategy] + " --cluster " +
                                        cluster + " --verify --json --timeout 20");
  expect_verified(r, kStrategies[strategy], c.ranks);
}

INSTANTIATE_TEST_SUITE_P(Models, RunModel,
                         ::testing::Combine(::testing::Range(0, 2), ::testing::Range(0, 4)));

class RunFrameworkStorage : public ::testing::TestWithParam<std::tuple<int, int>> {};

// Megatron's parameters to vLLM's (fused qkv and gate/up, TEGroupedMLP experts to w13/w2, a vocab
// of 1023 padded on both sides): every region holds its pattern and every padding byte is zero.
TEST_P(RunFrameworkStorage, EveryStrategyIsVerifiedThroughTheRegions) {
  const auto& [model, strategy] = GetParam();
  const ModelCase c = model == 0 ? ModelCase{"tiny-llama-vocab1023.json", "tp=2", "tp=4", 6}
                                 : ModelCase{"tiny-qwen3-moe.json", "tp=2,ep=2,etp=1", "tp=2", 4};
  const auto r = refit_run(c.ranks, "--model " + kModels + c.config + " --train " + c.train + " --infer " +
                                        c.infer + " --strategy " + kStrategies[strategy] +
                                        " --cluster cpu-host:gpus_per_domain=2 --storage framework --verify "
                                        "--json --timeout 20 --staging 4096");
  expect_verified(r, kStrategies[strategy], c.ranks);
}

INSTANTIATE_TEST_SUITE_P(Models, RunFrameworkStorage,
                         ::testing::Combine(::testing::Range(0, 2), ::testing::Range(0, 4)));

// --storage framework needs to know the frameworks: a version 1 manifest is refused, naming it.
TEST(RunFrameworkStorage, AManifestWithoutStorageMapsIsRefused) {
  const auto path = std::filesystem::temp_directory_path() / "refit_v1_manifest.json";
  testing::run_shell(std::string(REFIT_CLI_PATH) + " models " + kModels + "tiny-llama.json --train tp=1 " +
                     "--infer tp=1 --write-manifest " + path.string());
  const auto r = refit_run(2, "--manifest " + path.string() + " --storage framework --timeout 20");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("has no storage maps"), std::string::npos) << r.err;
}

// FP8 in flight under mpirun: Megatron tp=2 holds bf16, every linear weight crosses as fp8 with
// its scales to vLLM tp=2 twice, and each inference rank's fp8 values and scales are what the
// quantizer makes of the pattern; half the linear weights' bytes move (0.64 of all, as in
// PlanCli.QuantizeAtTheSenderHalvesTheLinearWeightsOnTheNetwork).
TEST(RunFp8InFlight, LinearWeightsCrossAsFp8AndVerifyByteForByte) {
  const std::string problem = "--model " + kModels +
                              "small-llama-blocks.json --train tp=2 --infer tp=2,engines=2 "
                              "--cluster cpu-host:gpus_per_domain=2 --verify --json";
  for (const char* scheme : {"fp8-block128", "mxfp8"}) {
    SCOPED_TRACE(scheme);
    const auto r = refit_run(6, problem + " --strategy refit --quantize " + scheme);
    expect_verified(r, "refit", 6);
  }
}

// FP8 at the landing ranks under mpirun: Megatron tp=4 cuts q, k, v and o_proj's blocks, so
// each reaches one engine in bf16, whose two ranks quantize their boxes once and send fp8 values
// and scales on to the other engine; every inference rank's fp8 values and scales (and the
// landing ranks' bf16 copies) are checked byte for byte, under every strategy that sends from
// the ranks holding a tensor.
TEST(RunFp8InFlight, WeightsWhoseBlocksTrainingCutsAreQuantizedOnceAtLanding) {
  const std::string problem =
      "--model " + kModels +
      "small-llama-blocks.json --train tp=4 --infer tp=2,engines=2 "
      "--cluster cpu-host:gpus_per_domain=2 --quantize fp8-block128 --quantize-at landing "
      "--verify --json --timeout 20";
  for (const char* strategy : {"refit", "direct", "m2n-ring"}) {
    SCOPED_TRACE(strategy);
    expect_verified(refit_run(8, problem + " --strategy " + strategy), strategy, 8);
  }
}

// Random layouts (uneven, empty, replicated and strided boxes, mixed dtypes) through manifests.
TEST(RunManifest, RandomLayoutsAreVerified) {
  testing::RandomProblems gen(2024);
  const auto dir =
      std::filesystem::temp_directory_path() / ("refit_run_manifests_" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  for (int i = 0; i < 4; ++i) {
    // An even world: NVLink domains of two processes must divide the cpu-host node.
    const auto sources = static_cast<std::int32_t>(gen.uniform(1, 3));
    const auto destinations = (i % 2 == 0 ? 4 : 6) - sources;
    const auto problem = gen.problem(sources, destinations, 4, 40);
    const auto path = dir / ("m" + std::to_string(i) + ".json");
    ASSERT_TRUE(models::save_manifest(problem, path));
    SCOPED_TRACE(::testing::Message() << "manifest " << i << ": " << sources << " -> " << destinations);
    const auto r = refit_run(sources + destinations,
                             "--manifest " + path.string() + " --strategy " + kStrategies[i] +
                                 " --cluster cpu-host:gpus_per_domain=2 --chunk 1000 --verify --json");
    expect_verified(r, kStrategies[i], sources + destinations);
  }
  std::filesystem::remove_all(dir);
}

std::int64_t stored_directly(const std::string& out) {
  const auto j = nlohmann::json::parse(out, nullptr, false);
  std::int64_t sum = 0;
  for (const auto& r : j["per_rank"]) sum += r["bytes_stored_directly"].get<std::int64_t>();
  return sum;
}

// Training and four inference engines in one domain: each tensor of 2 MiB or more is scattered in
// slabs from its one holder to the replicas, which forward their slabs to each other (NVLink
// relays between engines); every replica must still end with the whole model.
TEST(RunModel, PiecesScatteredInsideADomainAndSharedOutAreVerified) {
  const auto r =
      refit_run(5, "--model " + kModels +
                       "wide-llama.json --train tp=1 --infer tp=1,engines=4 "
                       "--cluster cpu-host:gpus_per_node=8,gpus_per_domain=8 --verify --json --timeout 20");
  expect_verified(r, "refit", 5);
}

// Shards live in memory the executor allocated, which UCX shares between the processes: puts are
// stores made directly into it, unless --no-direct-stores sends them all through ucp_put_nbx.
TEST(RunPuts, DirectStoresByDefaultAndThroughUcxOnRequest) {
  const std::string args = "--model " + kModels +
                           "tiny-llama.json --train tp=2 --infer tp=2 "
                           "--cluster cpu-host --verify --json --timeout 20";
  const auto direct = refit_run(4, args);
  expect_verified(direct, "refit", 4);
  EXPECT_GT(stored_directly(direct.out), 0) << direct.out;
  const auto through_ucx = refit_run(4, args + " --no-direct-stores");
  expect_verified(through_ucx, "refit", 4);
  EXPECT_EQ(stored_directly(through_ucx.out), 0) << through_ucx.out;
}

// One prepared plan executed three times, as an RL job refits every step: the report lists each
// execution (the slowest rank's time), "seconds" is their median, and the destinations verify
// after the last one.
TEST(RunIterations, EachExecutionIsReportedAndTheLastIsVerified) {
  const auto r = refit_run(4, "--model " + kModels +
                                  "tiny-llama.json --train tp=2 --infer tp=2 --iterations 3 "
                                  "--cluster cpu-host:gpus_per_domain=2 --verify --json --timeout 20");
  expect_verified(r, "refit", 4);
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.contains("iteration_seconds")) << r.out;
  auto times = j["iteration_seconds"].get<std::vector<double>>();
  ASSERT_EQ(times.size(), 3u) << r.out;
  for (const double t : times) EXPECT_GT(t, 0.0);
  std::ranges::sort(times);
  EXPECT_EQ(j["seconds"].get<double>(), times[1]);
}

// A soak, shorter than the README's 1000 iterations: a prepared plan executed 200 times keeps each
// rank's resident memory flat once warmed up (the first tenth, 20 executions). Nothing may grow
// per execution; what does grow is settling (allocator and transport pools: 0.4 MB at most from
// 20 to 200 executions on this machine, 0.05 MB from 400 to 4000). The bound, 1 MiB per rank,
// fails a leak of 6 KB per execution (75 bytes for each of the 78 chunks a training rank sends,
// over 180 executions), and a leaked copy of any shard per execution.
TEST(RunSoak, ResidentMemoryStaysFlatAfterTheWarmUp) {
#if defined(__SANITIZE_ADDRESS__)
  GTEST_SKIP() << "AddressSanitizer keeps freed memory in quarantine, so resident memory grows with churn";
#endif
  const auto r =
      refit_run(6,
                "--model " + kModels +
                    "tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2 --iterations 200 "
                    "--cluster cpu-host:gpus_per_domain=2 --chunk 4096 --verify --json --timeout 20",
                300);
  expect_verified(r, "refit", 6);
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_EQ(j["warm_up_iterations"], 20);
  EXPECT_EQ(j["iteration_seconds"].size(), 200u);
  constexpr std::int64_t kBound = 1 << 20;
  for (const auto& rank : j["per_rank"]) {
    const auto& m = rank["resident_bytes"];
    EXPECT_GT(m["after_warm_up"].get<std::int64_t>(), 0) << rank;
    EXPECT_LT(m["end"].get<std::int64_t>() - m["after_warm_up"].get<std::int64_t>(), kBound) << rank;
  }
  EXPECT_LT(j["resident_growth_bytes"].get<std::int64_t>(), kBound) << r.out;
}

// A manifest of `tensors` int8 tensors of `bytes` each, whole on training rank 0 and on inference
// rank 1: each rank's shards are tensors x bytes.
std::filesystem::path whole_tensors(const std::string& name, int tensors, std::int64_t bytes) {
  nlohmann::json t = nlohmann::json::array();
  for (int i = 0; i < tensors; ++i)
    t.push_back({{"name", "w" + std::to_string(i)},
                 {"shape", {bytes}},
                 {"dtype", "int8"},
                 {"source", {{"mesh", {1}}, {"ranks", {0}}, {"placements", {"R"}}}},
                 {"destination", {{"mesh", {1}}, {"ranks", {1}}, {"placements", {"R"}}}}});
  const auto path = std::filesystem::temp_directory_path() / (name + std::to_string(::getpid()) + ".json");
  std::ofstream(path) << nlohmann::json{
      {"format", "refit-manifest"},
      {"version", 1},
      {"source_ranks", 1},
      {"destination_ranks", 1},
      {"tensors", t}}.dump();
  return path;
}

// Two 4 GiB shards under `ulimit -v` of 3 GB used to segfault inside UCX's error path; now each
// rank refuses before allocating, naming the limit and what is left of it (exit 2).
TEST(RunResources, AnAddressSpaceLimitIsRefusedUpFrontNamingIt) {
  const auto manifest = whole_tensors("refit_ulimit_", 2, std::int64_t{4} << 30);
  const auto r =
      testing::run_shell(std::string(testing::kMpiEnvironment) + "timeout -k 5 60 " + REFIT_MPIEXEC +
                         " --oversubscribe -np 2 sh -c 'ulimit -v 3000000; exec \"$@\"' sh " +
                         REFIT_CLI_PATH + " run --manifest " + manifest.string());
  std::filesystem::remove(manifest);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("allocate_host: 8.00 GiB would pass this process's address-space limit"),
            std::string::npos)
      << r.err;
}

// /dev/shm too small for the shards (a private 48 MiB /dev/shm in a mount namespace of the test's
// own, where unshare may make one): refused naming /dev/shm and its free space, not UCX's
// "Out of memory" after retries.
TEST(RunResources, ADevShmTooSmallIsRefusedNamingItsFreeSpace) {
  if (testing::run_shell("unshare -m true").exit_code != 0) GTEST_SKIP() << "no mount namespace here";
  const auto manifest = whole_tensors("refit_shm_", 2, std::int64_t{64} << 20);
  const auto r = testing::run_shell("unshare -m sh -c 'mount -t tmpfs -o size=48m tmpfs /dev/shm && " +
                                    std::string(testing::kMpiEnvironment) + "timeout -k 5 60 " +
                                    REFIT_MPIEXEC + " --oversubscribe -np 2 " + REFIT_CLI_PATH +
                                    " run --manifest " + manifest.string() + "'");
  std::filesystem::remove(manifest);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("allocate_host: 128.0 MiB of shared memory, but /dev/shm has"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace refit
