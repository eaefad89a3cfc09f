// `refit run --join` with real processes under mpirun: after a full refit (verified), engine E
// restarts (fresh zeroed memory, fresh executor) and only the join's processes fill it again
// (docs/elastic.md); the others call nothing and send nothing.
//
// The problem: tiny-qwen3-moe, Megatron TP2 x EP2 (ranks 0, 1) -> three vLLM engines of TP2
// (engine e: ranks 2+2e, 3+2e), NVLink domains of two processes (one per engine), 4 KiB chunks.
// Expected of every join, whoever sends:
// - the restarted engine holds the current weights byte for byte (--verify: its fresh buffers,
//   zero before the join, hold the pattern after it), and so does every engine after the full refit;
// - the join world is the senders' ranks then the joining engine's (facade/join_run.h), and every
//   other rank is "free" and sends 0 bytes;
// - each piece enters the joining engine's domain once, from whoever sends it, and is completed
//   inside it over NVLink, so what the joining ranks receive is what the senders send plus what
//   the joining ranks forward to each other: sum(received) = peer_bytes + training_bytes +
//   relayed_bytes; and what enters from outside (peer_bytes + training_bytes) is the same bytes
//   whether peers, training ranks or both send them.
#include <gtest/gtest.h>

#include <numeric>

#include <nlohmann/json.hpp>

#include "mpirun.h"

namespace refit {
namespace {

const std::string kProblem = "--model " + std::string(REFIT_TEST_DATA_DIR) +
                             "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,engines=3 "
                             "--cluster cpu-host:gpus_per_domain=2 --chunk 4096";
constexpr int kRanks = 8;

// A dense model whose every weight cuts into whole MXFP8 blocks at tp=2.
const std::string kDenseProblem = "--model " + std::string(REFIT_TEST_DATA_DIR) +
                                  "/models/tiny-llama.json --train tp=2 --infer tp=2,engines=3 "
                                  "--cluster cpu-host:gpus_per_domain=2 --chunk 4096";

nlohmann::json join_report(const std::string& args, const std::string& problem = kProblem) {
  const auto r = testing::refit_run(kRanks, problem + " --verify --json " + args, 120);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  EXPECT_TRUE(j.is_object() && j.contains("join")) << r.out << r.err;
  if (!j.is_object() || !j.contains("join")) return nlohmann::json::object();
  EXPECT_EQ(j["verified"], true) << r.out;  // the full refit and the join, every element
  EXPECT_EQ(j["join"]["verified"], true) << r.out;
  return j["join"];
}

std::int64_t sum_of(const nlohmann::json& join, const char* role, const char* field) {
  std::int64_t sum = 0;
  for (const auto& r : join["per_rank"])
    if (r["role"] == role) sum += r[field].get<std::int64_t>();
  return sum;
}

std::vector<int> ranks_of(const nlohmann::json& join, const char* role) {
  std::vector<int> out;
  for (const auto& r : join["per_rank"])
    if (r["role"] == role) out.push_back(r["rank"].get<int>());
  return out;
}

// What lands in the joining engine is what the senders send plus the joining ranks' own forwards.
void expect_every_byte_sent_lands(const nlohmann::json& join) {
  EXPECT_EQ(sum_of(join, "joining", "bytes_received"), join["peer_bytes"].get<std::int64_t>() +
                                                           join["training_bytes"].get<std::int64_t>() +
                                                           join["relayed_bytes"].get<std::int64_t>());
  EXPECT_EQ(sum_of(join, "joining", "bytes_sent"), join["relayed_bytes"].get<std::int64_t>());
  EXPECT_EQ(sum_of(join, "free", "bytes_sent"), 0);
  EXPECT_EQ(sum_of(join, "free", "bytes_received"), 0);
}

TEST(RunJoin, APeersOnlyJoinRefillsARestartedEngineWhileTheTrainingRanksAreFree) {
  for (const char* storage : {"logical", "framework"}) {
    SCOPED_TRACE(storage);
    const auto join = join_report(std::string("--storage ") + storage + " --join 1 --from peers");
    // Engine 1 (ranks 4, 5) from engines 0 and 2 (the default: every other engine).
    EXPECT_EQ(join["engine"], 1);
    EXPECT_EQ(join["peers"], nlohmann::json::array({0, 2}));
    EXPECT_EQ(join["world"], nlohmann::json::array({2, 3, 6, 7, 4, 5}));
    EXPECT_EQ(ranks_of(join, "free"), (std::vector<int>{0, 1}));  // the training ranks
    EXPECT_EQ(ranks_of(join, "peer"), (std::vector<int>{2, 3, 6, 7}));
    EXPECT_EQ(ranks_of(join, "joining"), (std::vector<int>{4, 5}));
    EXPECT_EQ(join["training_bytes"], 0);
    EXPECT_GT(join["peer_bytes"].get<std::int64_t>(), 0);
    EXPECT_EQ(join["peer_tensors"], join["tensors"]);
    expect_every_byte_sent_lands(join);
  }
}

// Engine 0 from the training ranks and engine 2: the balance gives each side some tensors; the
// bytes entering engine 0 are those a join from peers only, or from training only, brings in.
TEST(RunJoin, AJoinFromBothSplitsTheTensorsBetweenTrainingRanksAndPeers) {
  const auto both = join_report("--join 0 --peers 2 --from both");
  EXPECT_EQ(both["world"], nlohmann::json::array({0, 1, 6, 7, 2, 3}));
  EXPECT_EQ(ranks_of(both, "free"), (std::vector<int>{4, 5}));  // engine 1 is no peer
  EXPECT_GT(both["training_bytes"].get<std::int64_t>(), 0);
  EXPECT_GT(both["peer_bytes"].get<std::int64_t>(), 0);
  EXPECT_GT(both["peer_tensors"].get<int>(), 0);
  EXPECT_LT(both["peer_tensors"].get<int>(), both["tensors"].get<int>());
  expect_every_byte_sent_lands(both);

  const auto peers = join_report("--join 0 --peers 2 --from peers");
  const auto training = join_report("--join 0 --from training");
  EXPECT_EQ(ranks_of(training, "free"), (std::vector<int>{4, 5, 6, 7}));
  EXPECT_EQ(training["peer_bytes"], 0);
  const auto entering = [](const nlohmann::json& j) {
    return j["peer_bytes"].get<std::int64_t>() + j["training_bytes"].get<std::int64_t>();
  };
  EXPECT_EQ(entering(both), entering(peers));
  EXPECT_EQ(entering(both), entering(training));
}

// Weights quantized at the senders: the peers hold them in fp8 with their scales and send them as
// they are (as FP8 training ranks would), a weight and its scales from one side. Once refused at
// prepare: the peers were asked for the bf16 weight, which no engine keeps, or a weight's scales
// came from the other side.
TEST(RunJoin, AJoinOfFp8WeightsSendsThePeersFp8AsTheyHoldIt) {
  for (const char* from : {"peers", "both"}) {
    SCOPED_TRACE(from);
    const auto join =
        join_report(std::string("--quantize mxfp8 --quantize-at sender --join 0 --peers 2 --from ") + from,
                    kDenseProblem);
    EXPECT_GT(join["peer_bytes"].get<std::int64_t>(), 0);
    expect_every_byte_sent_lands(join);
  }
}

TEST(RunJoin, BadJoinsAreBadInputNamingTheOption) {
  for (const auto& [args, text] : std::vector<std::pair<std::string, std::string>>{
           {"--join 3", "--join: engine 3 is not in [0, 3)"},
           {"--join 1 --peers 1", "--peers: engine 1 is the one that joins"},
           {"--join 1 --peers 2,0", "--peers: 0 follows 2"},
           {"--join 1 --from training --peers 0", "--peers: with --from training no engine sends"},
           {"--join 1 --from nobody", "--from: 'nobody'"},
           {"--join 1 --elastic", "--elastic excludes --join"},
           {"--peers 0", "--peers requires --join"}}) {
    const auto r = testing::refit_run(kRanks, kProblem + " " + args);
    EXPECT_EQ(r.exit_code, 2) << args << ": " << r.err;
    EXPECT_NE(r.err.find(text), std::string::npos) << args << ": " << r.err;
  }
}

TEST(RunJoin, HelpSaysWhatAJoinDoes) {
  const auto r = testing::run_shell(std::string(REFIT_CLI_PATH) + " run --help");
  ASSERT_EQ(r.exit_code, 0);
  for (const char* text : {"--join", "--peers", "--from", "restarts", "free"})
    EXPECT_NE(r.out.find(text), std::string::npos) << text;
}

}  // namespace
}  // namespace refit
