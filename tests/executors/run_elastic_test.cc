// `refit run --elastic` with real processes under mpirun: an inference rank is killed (SIGKILL)
// in the middle of the transfer (`--test-fault`, cli/run_faults.h), and every other engine still
// completes its refit, verified. mpirun --enable-recovery lets the other ranks run on, and a
// wrapper prints each process's exit code and when it ended.
//
// The problem: tiny-qwen3-moe, Megatron TP2xEP2 (ranks 0, 1) -> two vLLM engines of TP2 (engine 0:
// ranks 2, 3; engine 1: ranks 4, 5), NVLink domains of two processes (one per engine), 4 KiB chunks.
// A second cluster makes engine 1 relay data for engine 0 (kRelays), which then completes through
// the repair step. Expected when rank 4 dies, with either: ranks 0-3 exit 0 (ranks 2 and 3 verified their own
// destinations), rank 5 exits 1 (its engine missed the step), every survivor ends within the
// timeout plus kMargin of the kill (the dead rank is noticed once silent for the timeout), and rank
// 0's JSON report lists engine 0 as completed and engine 1 as missed. The timeout is long enough
// that a live rank descheduled on a loaded machine is not taken for gone; the run's 120 s limit
// only guards against a hang.
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>

#include <nlohmann/json.hpp>

#include "mpirun.h"

namespace refit {
namespace {

const std::string kProblem = "--model " + std::string(REFIT_TEST_DATA_DIR) +
                             "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,engines=2 "
                             "--chunk 4096 --verify --json --elastic";
const std::string kNoRelays = "--cluster cpu-host:gpus_per_domain=2";
// Planned as for DGX H100 nodes, the `refit` strategy sends through engine 1 (ranks 4 and 5) data
// for engine 0 (ranks 2 and 3): the training NICs are the bottleneck there.
const std::string kRelays = "--cluster dgx-h100:gpus_per_domain=2";
constexpr int kRanks = 6;
constexpr double kTimeout = 10.0;
constexpr double kMargin = 5.0;

struct ElasticRun {
  testing::ShellResult shell;
  testing::ProcessEnds ends;
  nlohmann::json report;  // rank 0's
};

ElasticRun run_elastic(const std::string& fault_args, const std::string& cluster = kNoRelays) {
  auto shell = testing::refit_run(
      kRanks, kProblem + " " + cluster + " --timeout " + std::to_string(kTimeout) + " " + fault_args, 120,
      "--enable-recovery", testing::kEndReporter);
  auto ends = testing::process_ends(shell.err);
  auto report = nlohmann::json::parse(shell.out, nullptr, false);
  return ElasticRun{.shell = std::move(shell), .ends = std::move(ends), .report = std::move(report)};
}

void expect_exit(const ElasticRun& run, int rank, int code) {
  ASSERT_TRUE(run.ends.ends.contains(rank)) << "rank " << rank << " never ended:\n" << run.shell.err;
  EXPECT_EQ(run.ends.ends.at(rank).exit_code, code) << "rank " << rank << ":\n" << run.shell.err;
}

TEST(RunElastic, EveryEngineCompletesWhenNoneDies) {
  const auto run = run_elastic("");
  for (int rank = 0; rank < kRanks; ++rank) expect_exit(run, rank, 0);
  ASSERT_TRUE(run.report.is_object()) << run.shell.out << run.shell.err;
  EXPECT_EQ(run.report["engines_completed"], nlohmann::json::array({0, 1}));
  EXPECT_EQ(run.report["engines_missed"], nlohmann::json::array());
  EXPECT_EQ(run.report["verified"], true);
}

// Killed once it has sent its first chunk (execute), or once it first waits for data (receive).
// With relays through engine 1, engine 0 completes through the repair step (docs/elastic.md).
TEST(RunElastic, AnEngineKilledMidTransferCostsTheOthersNothing) {
  for (const auto& cluster : {kNoRelays, kRelays})
    for (const char* fault : {"4:execute:kill", "4:receive:kill"}) {
      SCOPED_TRACE(cluster + ", " + fault);
      const auto run = run_elastic(std::string("--test-fault ") + fault, cluster);
      ASSERT_TRUE(run.ends.fault_at) << "the fault never happened:\n" << run.shell.err;
      expect_exit(run, 4, 137);
      for (int rank : {0, 1, 2, 3}) expect_exit(run, rank, 0);
      expect_exit(run, 5, 1);
      EXPECT_NE(run.shell.err.find("rank 5: engine 1 missed the step"), std::string::npos) << run.shell.err;
      for (int rank : {0, 1, 2, 3, 5})
        if (run.ends.ends.contains(rank))
          EXPECT_LT(run.ends.ends.at(rank).at - *run.ends.fault_at, kTimeout + kMargin) << rank;
      ASSERT_TRUE(run.report.is_object()) << run.shell.out << run.shell.err;
      EXPECT_EQ(run.report["engines_completed"], nlohmann::json::array({0}));
      EXPECT_EQ(run.report["engines_missed"], nlohmann::json::array({1}));
      // What rank 0 stored directly is a part of what it sent, the transfers it completed (the
      // repair's included): once it also counted the chunks of transfers dropped for the dead rank.
      const auto& rank0 = run.report["per_rank"][0];
      EXPECT_LE(rank0["bytes_stored_directly"].get<std::int64_t>(), rank0["bytes_sent"].get<std::int64_t>());
    }
}

TEST(RunElastic, AnEngineThatMissedTheStepSavesNothing) {
  // --storage framework --save-destinations: ranks 2 and 3 (engine 0, completed) write their
  // parameters; rank 5, whose engine missed the step, writes none (once it wrote its zeros and
  // stale bytes beside the good files) and says so.
  char folder[] = "/tmp/refit-elastic-save-XXXXXX";
  ASSERT_NE(::mkdtemp(folder), nullptr);
  const std::string dir = folder;
  const auto run =
      run_elastic("--storage framework --save-destinations " + dir + " --test-fault 4:execute:kill");
  const auto files = [&](const char* rank) {
    const auto path = std::filesystem::path(dir) / rank;
    return std::filesystem::exists(path) ? std::distance(std::filesystem::directory_iterator(path),
                                                         std::filesystem::directory_iterator())
                                         : 0;
  };
  const auto saved2 = files("rank2"), saved3 = files("rank3"), saved5 = files("rank5");
  std::filesystem::remove_all(dir);
  expect_exit(run, 5, 1);
  EXPECT_GT(saved2, 0);
  EXPECT_EQ(saved3, saved2);
  EXPECT_EQ(saved5, 0);
  EXPECT_NE(
      run.shell.err.find("rank 5: engine 1 missed the step: it keeps weights that are not this step's (its "
                         "destinations were not saved)"),
      std::string::npos)
      << run.shell.err;
}

// A broadcast's ring passes each whole tensor through every rank, which keeps its own columns.
// tiny-llama, one training rank -> two engines of TP2 (engine 0: ranks 1, 2; engine 1: ranks 3,
// 4). Rank 2 dies: rank 3 lost what came through it, and the repair step re-sends it those whole
// tensors, to unpack its columns from a receive slot. Its full plan unpacked nothing, and a
// repair cannot register memory: the elastic prepare kept a slot for it. Engine 1 completes.
TEST(RunElastic, ABroadcastsRepairUnpacksIntoTheSlotThePrepareKeptForIt) {
  const auto shell = testing::refit_run(
      5,
      "--model " + std::string(REFIT_TEST_DATA_DIR) +
          "/models/tiny-llama.json --train tp=1 --infer tp=2,engines=2 --cluster "
          "cpu-host:gpus_per_domain=1,gpus_per_node=1 --strategy gather-broadcast --elastic --verify --json "
          "--timeout " +
          std::to_string(kTimeout) + " --test-fault 2:execute:kill",
      120, "--enable-recovery");
  const auto report = nlohmann::json::parse(shell.out, nullptr, false);
  ASSERT_TRUE(report.is_object()) << shell.out << shell.err;
  EXPECT_EQ(report["engines_completed"], nlohmann::json::array({1})) << shell.err;
  EXPECT_EQ(report["engines_missed"], nlohmann::json::array({0}));
  EXPECT_EQ(report["verified"], true);
}

TEST(RunElastic, WeightsQuantizedAtLandingRanksAreRefusedBeforeAnythingMoves) {
  // The landing rank of one engine makes the fp8 that the other takes: no repair could re-feed it.
  const auto shell = testing::refit_run(
      4, "--model " + std::string(REFIT_TEST_DATA_DIR) +
             "/models/tiny-llama.json --train tp=2 --infer tp=1,engines=2 --quantize fp8-block128 "
             "--quantize-at landing --cluster cpu-host --elastic");
  EXPECT_EQ(shell.exit_code, 2) << shell.err;
  EXPECT_NE(shell.err.find("--elastic: --quantize-at: tensor 'model.layers.0.self_attn.q_proj.weight' is "
                           "quantized at its landing ranks"),
            std::string::npos)
      << shell.err;
}

}  // namespace
}  // namespace refit
