// The fault matrix of `refit run` with the UCX executor, with real processes: one rank is killed
// (SIGKILL) or stalls at a chosen phase (set-up, prepare, execute, relaying: `--test-fault`, see
// cli/run_faults.h), or the ranks are given inputs that cannot work together (different plans, a
// buffer too small). mpirun --enable-recovery lets the other ranks run on (plain mpirun would kill
// the whole job at once), and a wrapper prints each process's exit code and when it ended.
//
// Expected: every other rank ("survivor") exits 1 within --timeout + 5 s of the fault, its error
// naming itself, the phase it failed in and the faulty rank; no rank exits 0 and nothing reports
// a transfer (a destination never reports success with partial data). Inputs that cannot work
// together are refused by every rank at prepare, before any byte moves, with exit 2 (bad input).
#include <gtest/gtest.h>

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <optional>
#include <regex>

#include "mpirun.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";

// tiny-qwen3-moe, Megatron TP2xEP2 (ranks 0, 1) -> vLLM TP2xDP2 (ranks 2-5), NVLink domains of two
// processes, 4 KiB chunks: every rank sends or receives many chunks, and ranks relay (with refit,
// each inference rank forwards one chunk at its end; along m2n-ring's chains, rank 2 forwards 33).
const std::string kProblem = "--model " + kModels +
                             "tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2 "
                             "--cluster cpu-host:gpus_per_domain=2 --chunk 4096 --verify --json";
constexpr int kRanks = 6;
constexpr double kTimeout = 3.0;
constexpr double kMargin = 5.0;  // survivors exit within kTimeout + kMargin of the fault

using testing::ProcessEnd;

struct FaultRun {
  testing::ShellResult shell;
  std::map<int, ProcessEnd> ends;  // by rank
  std::optional<double> fault_at;  // when the faulty rank acted
};

// A wrapper after testing::kEndReporter that gives `args` to rank `rank` alone, as a user's typo would.
std::string only_on_rank(int rank, const std::string& args) {
  return " sh -c 'if [ \"$OMPI_COMM_WORLD_RANK\" = " + std::to_string(rank) + " ]; then exec \"$@\" " + args +
         "; fi; exec \"$@\"' sh";
}

FaultRun run_with(const std::string& fault_args, const std::string& strategy = "refit",
                  const std::string& wrapper_tail = "") {
  auto shell = testing::refit_run(
      kRanks,
      kProblem + " --strategy " + strategy + " --timeout " + std::to_string(kTimeout) + " " + fault_args, 120,
      "--enable-recovery", testing::kEndReporter + wrapper_tail);
  auto ends = testing::process_ends(shell.err);
  FaultRun run{.shell = std::move(shell), .ends = std::move(ends.ends), .fault_at = ends.fault_at};
  return run;
}

// Every rank but `faulty` exits 1 within the bound, naming itself, `phase` and the faulty rank.
void expect_survivors_fail(const FaultRun& run, int faulty, const std::string& phase, const char* name) {
  const auto& err = run.shell.err;
  ASSERT_TRUE(run.fault_at) << "the fault never happened:\n" << err;
  EXPECT_EQ(run.shell.out.find('{'), std::string::npos) << "a transfer was reported:\n" << run.shell.out;
  double slowest = 0;
  for (int rank = 0; rank < kRanks; ++rank) {
    if (rank == faulty) continue;
    ASSERT_TRUE(run.ends.contains(rank)) << "rank " << rank << " never ended:\n" << err;
    const ProcessEnd& e = run.ends.at(rank);
    EXPECT_EQ(e.exit_code, 1) << "rank " << rank << ":\n" << err;
    slowest = std::max(slowest, e.at - *run.fault_at);
    EXPECT_LT(e.at - *run.fault_at, kTimeout + kMargin) << "rank " << rank << ":\n" << err;
    const std::regex named("refit run: error: rank " + std::to_string(rank) + ": " + phase +
                           "[^\n]*\\brank " + std::to_string(faulty) + "\\b");
    EXPECT_TRUE(std::regex_search(err, named))
        << "rank " << rank << " does not name " << phase << " and rank " << faulty << ":\n"
        << err;
  }
  // The figures of the README's fault matrix.
  std::printf("fault matrix: %s: survivors exited 1 within %.2f s of the fault (timeout %.1f s)\n", name,
              slowest, kTimeout);
}

// The faulty rank itself does not succeed either: killed, or failing once its stall is over.
void expect_faulty_does_not_succeed(const FaultRun& run, int faulty, int exit_code) {
  ASSERT_TRUE(run.ends.contains(faulty)) << run.shell.err;
  EXPECT_EQ(run.ends.at(faulty).exit_code, exit_code) << run.shell.err;
}

TEST(RunFaults, ARankKilledDuringPrepare) {
  // Rank 3 dies once the plan hashes are agreed, before the memory keys are exchanged: the others
  // wait for its keys in the bootstrap's allgather, which names who never arrived.
  const auto run = run_with("--test-fault 3:prepare:kill");
  expect_survivors_fail(run, 3, "prepare", "killed during prepare");
  expect_faulty_does_not_succeed(run, 3, 137);
}

TEST(RunFaults, ARankKilledWhileConnecting) {
  // Rank 3 dies once the keys are exchanged, before the connections are made and proven: the
  // others fail connecting to it, or wait for it in the agreement on the connections.
  const auto run = run_with("--test-fault 3:connect:kill");
  expect_survivors_fail(run, 3, "prepare", "killed while connecting");
  expect_faulty_does_not_succeed(run, 3, 137);
}

TEST(RunFaults, ARankKilledDuringExecute) {
  // Training rank 1 dies after its first chunk: its receivers hear nothing more from it.
  const auto run = run_with("--test-fault 1:execute:kill");
  expect_survivors_fail(run, 1, "execute, iteration 1 of 1", "killed during execute");
  expect_faulty_does_not_succeed(run, 1, 137);
}

TEST(RunFaults, ARankKilledWhileRelaying) {
  // Inference rank 2 dies once it has forwarded its first chunk of received data to rank 3.
  const auto run = run_with("--test-fault 2:relay:kill");
  expect_survivors_fail(run, 2, "execute, iteration 1 of 1", "killed while relaying");
  expect_faulty_does_not_succeed(run, 2, 137);
}

TEST(RunFaults, ARankKilledWhileRelayingAlongAChain) {
  // m2n-ring: rank 2 dies at the first of the 33 chunks it forwards down its chain, so the ranks
  // after it wait for the rest in the middle of the stream.
  const auto run = run_with("--test-fault 2:relay:kill", "m2n-ring");
  expect_survivors_fail(run, 2, "execute, iteration 1 of 1", "killed while relaying along a chain");
  expect_faulty_does_not_succeed(run, 2, 137);
}

TEST(RunFaults, ARankKilledBetweenExecutions) {
  // A refit every training step: rank 3 dies after the first of three executions, so the others
  // wait for it in the barrier that starts the second.
  const auto run = run_with("--test-fault 3:between:kill --iterations 3");
  expect_survivors_fail(run, 3, "execute, iteration 2 of 3", "killed between executions");
  expect_faulty_does_not_succeed(run, 3, 137);
}

TEST(RunFaults, ARankKilledDuringADeltaStep) {
  // A delta refit (direct plan, no relays): training rank 1 dies after the first chunk of the
  // first step's payloads (the fault acts at a rank's first chunk); its receivers fail instead of
  // decoding what they got.
  const auto run = run_with("--test-fault 1:execute:kill --delta 0.01 --iterations 3", "direct");
  expect_survivors_fail(run, 1, "execute, iteration 1 of 3", "killed during a delta step");
  expect_faulty_does_not_succeed(run, 1, 137);
}

TEST(RunFaults, ARankKilledBeforeADeltaStepsExchange) {
  // Rank 3 dies after the first step, so the others wait for its checksums in the next step's
  // first agreement.
  const auto run = run_with("--test-fault 3:between:kill --delta 0.01 --iterations 3", "direct");
  expect_survivors_fail(run, 3, "execute, iteration 2 of 3", "killed before a delta step's exchange");
  expect_faulty_does_not_succeed(run, 3, 137);
}

TEST(RunFaults, ARankStalledDuringExecute) {
  // Rank 0 stops after its first chunk for three timeouts, heartbeats included: the others take
  // it for hung after one timeout; when it wakes, it fails too (its peers told it why).
  const auto run = run_with("--test-fault 0:execute:stall");
  expect_survivors_fail(run, 0, "execute, iteration 1 of 1", "stalled during execute");
  expect_faulty_does_not_succeed(run, 0, 1);
}

TEST(RunFaults, ARankStalledBeforeSetUp) {
  // Rank 4 never arrives at the first collective in time: the others give up on it there.
  const auto run = run_with("--test-fault 4:set-up:stall");
  expect_survivors_fail(run, 4, "set-up", "stalled before set-up");
  expect_faulty_does_not_succeed(run, 4, 1);
}

// Every rank exits 2 with a message naming itself, `phase` (prepare unless said), and `what`.
void expect_every_rank_refuses(const FaultRun& run, const std::string& what,
                               const std::string& phase = "prepare") {
  EXPECT_EQ(run.shell.out.find('{'), std::string::npos) << "a transfer was reported:\n" << run.shell.out;
  for (int rank = 0; rank < kRanks; ++rank) {
    ASSERT_TRUE(run.ends.contains(rank)) << "rank " << rank << " never ended:\n" << run.shell.err;
    EXPECT_EQ(run.ends.at(rank).exit_code, 2) << "rank " << rank << ":\n" << run.shell.err;
    const std::regex named("refit run: error: rank " + std::to_string(rank) + ": " + phase + ": [^\n]*" +
                           what);
    EXPECT_TRUE(std::regex_search(run.shell.err, named)) << "rank " << rank << ":\n" << run.shell.err;
  }
}

TEST(RunFaults, RanksThatDisagreeOnThePlanRefuseBeforeAnyByteMoves) {
  // The ranks compare their settings, the plan hash among them, before anything collective.
  const auto run = run_with("--test-perturb-plan-on-rank 3");
  expect_every_rank_refuses(run, "ranks disagree on the plan hash \\([^\n]*rank 3 has [0-9a-f]{16}",
                            "set-up");
}

TEST(RunFaults, AnOptionGivenOnOneRankOnlyIsNamedAtOnceNotAtTheTimeout) {
  // --iterations changes how many collective calls a rank makes; it used to make the job fail
  // after the timeout, blaming a live peer. Now every rank names the option and who has what.
  const auto iterations = run_with("", "refit", only_on_rank(3, "--iterations 3"));
  expect_every_rank_refuses(
      iterations, "ranks disagree on the --iterations \\(ranks 0, 1, 2, 4, 5 have 1; rank 3 has 3\\)",
      "set-up");
  const auto staging = run_with("", "refit", only_on_rank(5, "--staging 65536"));
  expect_every_rank_refuses(staging, "ranks disagree on the --staging \\([^\n]*rank 5 has 65536\\)",
                            "set-up");
}

// A fresh folder under /tmp, removed with the object.
class TempFolder {
 public:
  TempFolder() {
    char name[] = "/tmp/refit-save-XXXXXX";
    if (::mkdtemp(name) != nullptr) path_ = name;
  }
  ~TempFolder() { std::system(("rm -rf " + path_).c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(RunFaults, AnOutputThatCannotBeWrittenIsRefusedBeforeAnyByteMoves) {
  // Rank 4's folder under --save-destinations is a link out of it, which refit does not follow.
  // Every file is checked at set-up: once, rank 4 failed after the whole transfer, in the report.
  const TempFolder dir;
  ASSERT_EQ(std::system(("ln -s /tmp " + dir.path() + "/rank4").c_str()), 0);
  const auto run = run_with("--storage framework --save-destinations " + dir.path());
  expect_every_rank_refuses(
      run, "--save-destinations: " + dir.path() + "/rank4: is a symbolic link or not a folder", "set-up");
}

TEST(RunFaults, AFileThatExistsIsRefusedBeforeAnyOtherIsWritten) {
  // Rank 2's lm_head.weight is there from an earlier run: nothing is written, so the folder never
  // mixes two runs (once, every other file was written before the refusal).
  const TempFolder dir;
  ASSERT_EQ(
      std::system(
          ("mkdir " + dir.path() + "/rank2 && echo old > " + dir.path() + "/rank2/lm_head.weight").c_str()),
      0);
  const auto run = run_with("--storage framework --save-destinations " + dir.path());
  expect_every_rank_refuses(
      run, "--save-destinations: " + dir.path() + "/rank2/lm_head.weight: already exists", "set-up");
  for (const char* rank : {"rank2", "rank3", "rank4", "rank5"}) {
    const auto folder = std::filesystem::path(dir.path()) / rank;
    const auto files = std::filesystem::exists(folder)
                           ? std::distance(std::filesystem::directory_iterator(folder),
                                           std::filesystem::directory_iterator())
                           : 0;
    EXPECT_EQ(files, std::string(rank) == "rank2" ? 1 : 0) << rank;
  }
}

TEST(RunFaults, AnOutputFolderThatIsAFileIsBadInput) {
  // Once exit 1 on every rank ("cannot be created: Not a directory"), after the whole transfer.
  const TempFolder dir;
  const auto file = dir.path() + "/plain";
  ASSERT_EQ(std::system(("touch " + file).c_str()), 0);
  const auto run = run_with("--storage framework --save-destinations " + file);
  expect_every_rank_refuses(run, "--save-destinations: " + file + ": is not a folder", "set-up");
}

TEST(RunFaults, ABufferTooSmallIsRefusedNamingTheTensorAndRank) {
  // Rank 3's first destination buffer is one byte short.
  const auto run = run_with("--test-short-buffer-on-rank 3");
  expect_every_rank_refuses(run,
                            "rank 3: destinations\\[0\\]: the buffer of tensor '[^']+' holds [0-9]+ bytes");
}

TEST(RunFaults, TheProcessCountMustMatchTheProblem) {
  const auto r = testing::refit_run(
      3, "--model " + kModels + "tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("mpirun started 3 processes, the problem needs 6 (2 training + 4 inference ranks)"),
            std::string::npos)
      << r.err;
}

TEST(RunFaults, AnUnknownFaultIsBadInput) {
  const auto r = testing::refit_run(1, "--manifest x.json --test-fault 1:lunch:kill");
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--test-fault: '1:lunch:kill' is not RANK:PHASE:ACTION"), std::string::npos) << r.err;
  // Faults that could never act: a test built on them would pass without a fault.
  const auto outside = testing::refit_run(2, "--manifest x.json --test-fault 7:execute:kill");
  EXPECT_EQ(outside.exit_code, 2) << outside.err;
  EXPECT_NE(outside.err.find("--test-fault: rank 7 is not one of the job's 2 ranks"), std::string::npos)
      << outside.err;
  const auto between = testing::refit_run(1, "--manifest x.json --test-fault 0:between:kill");
  EXPECT_EQ(between.exit_code, 2) << between.err;
  EXPECT_NE(between.err.find("--test-fault: 'between' acts after the first of several executions"),
            std::string::npos)
      << between.err;
}

TEST(RunFaults, AFaultThatNeverActsFailsTheRunItWasMeantToBreak) {
  // Training rank 0 only sends what it holds, so it never reaches a relay to die at: the transfer
  // completes everywhere, and rank 0 then refuses the run for a fault that did nothing.
  const auto run = run_with("--test-fault 0:relay:kill");
  EXPECT_FALSE(run.fault_at) << run.shell.err;
  for (int rank = 1; rank < kRanks; ++rank) {
    ASSERT_TRUE(run.ends.contains(rank)) << run.shell.err;
    EXPECT_EQ(run.ends.at(rank).exit_code, 0) << "rank " << rank << ":\n" << run.shell.err;
  }
  expect_faulty_does_not_succeed(run, 0, 2);
  EXPECT_NE(run.shell.err.find("refit run: error: rank 0: --test-fault: rank 0 never reached 'relay'"),
            std::string::npos)
      << run.shell.err;
}

}  // namespace
}  // namespace refit
