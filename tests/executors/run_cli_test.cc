// `refit run` as users start it: mpirun with 4 to 8 processes on this machine (shared memory and
// loopback only). Every strategy moves tiny HF models and random manifests and verifies every
// destination element; faults fail every rank, bounded and named.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <regex>

#include <nlohmann/json.hpp>

#include "random_problems.h"
#include "refit/models/manifest.h"
#include "shell.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";

// As root (CI containers) mpirun refuses to start without these; UCX stays on shared memory and
// loopback; under AddressSanitizer, MPI's and UCX's process-lifetime allocations are not leaks.
constexpr const char* kEnvironment =
    "OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 UCX_TLS=self,sm,tcp "
    "ASAN_OPTIONS=detect_leaks=0 ";

// mpirun -np N refit run ARGS, killed after `limit` seconds so that a hang fails instead of
// stalling the suite.
testing::ShellResult refit_run(int np, const std::string& args, int limit = 60,
                               const std::string& mpirun_flags = "", const std::string& wrapper = "") {
  return testing::run_shell(std::string(kEnvironment) + "timeout -k 5 " + std::to_string(limit) + " " +
                            REFIT_MPIEXEC + " --oversubscribe " + mpirun_flags + " -np " +
                            std::to_string(np) + " " + wrapper + " " + REFIT_CLI_PATH + " run " + args);
}

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

// qwen3_moe: Megatron tp=2,ep=2 (2 ranks) -> vLLM tp=2,dp=2 (4 ranks);
// llama: Megatron tp=2,pp=2 (4 ranks) -> vLLM tp=4 (4 ranks).
constexpr ModelCase kCases[] = {{"tiny-qwen3-moe.json", "tp=2,ep=2", "tp=2,dp=2", 6},
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

TEST(RunFaults, TheProcessCountMustMatchTheProblem) {
  const auto r =
      refit_run(3, "--model " + kModels + "tiny-qwen3-moe.json --train tp=2,ep=2 --infer tp=2,dp=2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("mpirun started 3 processes, the problem needs 6 (2 training + 4 inference ranks)"),
            std::string::npos)
      << r.err;
}

// Rank 3 plans something else: every rank refuses at prepare, naming who has which hash, and no
// rank reports a transfer.
TEST(RunFaults, RanksThatDisagreeOnThePlanRefuseBeforeAnyByteMoves) {
  const auto r = refit_run(6, "--model " + kModels +
                                  "tiny-qwen3-moe.json --train tp=2,ep=2 --infer tp=2,dp=2 "
                                  "--test-perturb-plan-on-rank 3");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("ranks disagree on the plan hash"), std::string::npos) << r.err;
  EXPECT_TRUE(std::regex_search(r.err, std::regex("rank 3 has [0-9a-f]{16}"))) << r.err;
  EXPECT_EQ(r.out.find("moved"), std::string::npos) << r.out;
}

// Rank 1 kills itself (SIGKILL) after its first chunk. mpirun --enable-recovery lets the others
// run on, and a wrapper prints each process's exit code: every other rank must exit 1 within
// about --timeout, naming rank 1. (Plain mpirun would kill the whole job at once instead.)
TEST(RunFaults, AKilledRankMakesEveryOtherRankFailNamingIt) {
  const std::string wrapper =
      "sh -c '\"$@\"; rc=$?; echo \"refit-test: rank $OMPI_COMM_WORLD_RANK exit $rc\" >&2; "
      "if [ $rc -gt 128 ]; then kill -KILL $$; fi; exit $rc' sh";
  const auto start = std::chrono::steady_clock::now();
  const auto r =
      refit_run(6,
                "--model " + kModels +
                    "tiny-qwen3-moe.json --train tp=2,ep=2 --infer tp=2,dp=2 "
                    "--strategy refit --cluster cpu-host:gpus_per_domain=2 --chunk 4096 --timeout 3 "
                    "--test-kill-rank 1",
                60, "--enable-recovery", wrapper);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 20.0) << r.err;
  EXPECT_NE(r.err.find("refit-test: rank 1 exit 137"), std::string::npos) << r.err;
  for (int rank : {0, 2, 3, 4, 5}) {
    EXPECT_NE(r.err.find("refit-test: rank " + std::to_string(rank) + " exit 1\n"), std::string::npos)
        << r.err;
    const std::regex named("refit run: error: rank " + std::to_string(rank) +
                           ": .*rank 1 stopped responding");
    EXPECT_TRUE(std::regex_search(r.err, named)) << "rank " << rank << ":\n" << r.err;
  }
}

// Rank 2 stalls before it sets up, so the others wait in the bootstrap's first collective: they
// must give up after --timeout (2 s) instead of hanging, each saying which collective and why.
TEST(RunFaults, ARankThatNeverArrivesFailsTheBootstrapWithinTheTimeout) {
  const auto start = std::chrono::steady_clock::now();
  const auto r = refit_run(
      4, "--model " + kModels + "tiny-llama.json --train tp=2 --infer tp=2 --timeout 2 --test-stall-rank 2",
      60);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, 15.0) << r.err;
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_TRUE(
      std::regex_search(r.err, std::regex("refit run: error: rank [013]: MPI_Iallgather did not complete "
                                          "within 2.0 s: a rank died or hangs before reaching it")))
      << r.err;
}

}  // namespace
}  // namespace refit
