// refit plan and refit simulate through the real binary: the JSON contracts, determinism across
// processes, plan files, traces, and bad input (exit code 2 naming the field).
#include <filesystem>
#include <fstream>
#include <map>
#include <set>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "run_cli.h"

namespace refit {
namespace {

using refit::testing::run_refit;

// A tiny Qwen3-MoE (8 experts) from Megatron TP2xEP2 (4 ranks) to vLLM TP2xDP2 (4 ranks) on
// 2-GPU nodes, so data crosses the network and NVLink.
const std::string kProblem = std::string("--model ") + REFIT_TEST_DATA_DIR +
                             "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2 "
                             "--cluster dgx-h100:gpus_per_node=2";

std::filesystem::path temp_file(const std::string& name) {
  return std::filesystem::temp_directory_path() / (name + "_" + std::to_string(::getpid()));
}

TEST(PlanCli, JsonHasTheContractFields) {
  const auto r = run_refit("plan " + kProblem + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  for (const char* key :
       {"strategy", "tensors", "transfers", "messages", "total_bytes", "network_bytes", "nvlink_bytes",
        "max_nic_tx_bytes", "max_nic_rx_bytes", "lower_bound_s", "plan_seconds", "plan_hash"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["strategy"], "refit");
  EXPECT_GT(j["network_bytes"].get<std::int64_t>(), 0);
  EXPECT_EQ(j["plan_hash"].get<std::string>().size(), 16u);
}

TEST(PlanCli, JsonHasBytesPerNicPerNvlinkPortAndPerDomainThatAddUpToItsTotals) {
  // Every network byte leaves one NIC and enters one; every NVLink byte leaves one GPU's port and
  // enters another's; the maxima are the arrays' largest entries.
  const auto r = run_refit("plan " + kProblem + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out);
  const auto sum = [&](const char* key) {
    std::int64_t total = 0;
    for (const auto& b : j.at(key)) total += b.get<std::int64_t>();
    return total;
  };
  const auto max = [&](const char* key) {
    std::int64_t most = 0;
    for (const auto& b : j.at(key)) most = std::max(most, b.get<std::int64_t>());
    return most;
  };
  const auto network = j["network_bytes"].get<std::int64_t>();
  EXPECT_EQ(sum("nic_tx_bytes"), network);
  EXPECT_EQ(sum("nic_rx_bytes"), network);
  EXPECT_EQ(sum("nvlink_egress_bytes"), j["nvlink_bytes"].get<std::int64_t>());
  EXPECT_EQ(sum("nvlink_ingress_bytes"), j["nvlink_bytes"].get<std::int64_t>());
  EXPECT_EQ(sum("domain_ingress_bytes"), network);
  EXPECT_EQ(max("nic_tx_bytes"), j["max_nic_tx_bytes"].get<std::int64_t>());
  EXPECT_EQ(max("nic_rx_bytes"), j["max_nic_rx_bytes"].get<std::int64_t>());
  EXPECT_EQ(max("domain_ingress_bytes"), j["max_domain_ingress_bytes"].get<std::int64_t>());
}

TEST(PlanCli, WithoutAClusterTheDefaultPresetIsSaidOnStderrAndInHelp) {
  // DESIGN writes CLUSTER as given; planning without one takes dgx-h100 and says so, and each
  // command's --help names its own default (run's is this host, cpu-host).
  const auto r = run_refit("plan --model " + std::string(REFIT_TEST_DATA_DIR) +
                           "/models/tiny-llama.json --train tp=2 --infer tp=2 --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("no cluster given: the dgx-h100 preset"), std::string::npos) << r.err;
  EXPECT_EQ(run_refit("plan " + kProblem + " --json").err.find("no cluster given"), std::string::npos);
  EXPECT_NE(run_refit("plan --help").out.find("the dgx-h100 preset when none is given"), std::string::npos);
  EXPECT_NE(run_refit("run --help").out.find("the cpu-host preset when none is given"), std::string::npos);
}

TEST(PlanCli, SameInputsGiveTheSameHashInSeparateProcesses) {
  for (const char* strategy : {"refit", "direct", "m2n-ring", "gather-broadcast"}) {
    const auto a = run_refit("plan " + kProblem + " --strategy " + strategy + " --json");
    const auto b = run_refit("plan " + kProblem + " --strategy " + strategy + " --json");
    ASSERT_EQ(a.exit_code, 0) << a.err;
    ASSERT_EQ(b.exit_code, 0) << b.err;
    EXPECT_EQ(nlohmann::json::parse(a.out)["plan_hash"], nlohmann::json::parse(b.out)["plan_hash"])
        << strategy;
  }
}

TEST(PlanCli, PlanFileFeedsTheSimulator) {
  const auto path = temp_file("plan.json");
  const auto planned =
      run_refit("plan " + kProblem + " --strategy m2n-ring --out " + path.string() + " --json");
  ASSERT_EQ(planned.exit_code, 0) << planned.err;
  const auto sim = run_refit("simulate " + kProblem + " --plan " + path.string() + " --json");
  ASSERT_EQ(sim.exit_code, 0) << sim.err;
  EXPECT_EQ(nlohmann::json::parse(sim.out)["strategies"][0]["strategy"], "m2n-ring");
  // The same plan file does not fit another problem: bad input.
  const auto other =
      run_refit("simulate --model " + std::string(REFIT_TEST_DATA_DIR) +
                "/models/tiny-llama.json --train tp=2,pp=2 --infer tp=2,dp=2 --plan " + path.string());
  EXPECT_EQ(other.exit_code, 2) << other.err;
  EXPECT_NE(other.err.find("--plan"), std::string::npos) << other.err;
  std::filesystem::remove(path);
}

TEST(SimulateCli, JsonHasOneEntryPerStrategy) {
  const auto one = run_refit("simulate " + kProblem + " --json");
  ASSERT_EQ(one.exit_code, 0) << one.err;
  const auto j = nlohmann::json::parse(one.out);
  ASSERT_EQ(j["strategies"].size(), 1u);
  for (const char* key : {"strategy", "predicted_s", "lower_bound_s", "network_bytes", "max_nic_rx_bytes"})
    EXPECT_TRUE(j["strategies"][0].contains(key)) << key;
  // No plan beats the lower bound.
  EXPECT_GE(j["strategies"][0]["predicted_s"].get<double>(),
            j["strategies"][0]["lower_bound_s"].get<double>());

  const auto all = run_refit("simulate " + kProblem + " --compare --json");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const auto c = nlohmann::json::parse(all.out);
  std::set<std::string> names;
  for (const auto& s : c["strategies"]) {
    names.insert(s["strategy"]);
    EXPECT_TRUE(s.contains("speedup_vs_gather_broadcast"));
  }
  EXPECT_EQ(names, (std::set<std::string>{"refit", "direct", "m2n-ring", "gather-broadcast"}));
}

TEST(SimulateCli, EachPredictionSaysWhichDeploymentRanIt) {
  // Defaults: refit's executors for refit's plans, NeMo RL for the baselines'.
  const auto refit = run_refit("simulate " + kProblem + " --json");
  ASSERT_EQ(refit.exit_code, 0) << refit.err;
  EXPECT_EQ(nlohmann::json::parse(refit.out)["strategies"][0]["deployment"], "refit");
  const auto m2n = run_refit("simulate " + kProblem + " --strategy m2n-ring --json");
  ASSERT_EQ(m2n.exit_code, 0) << m2n.err;
  const auto j = nlohmann::json::parse(m2n.out)["strategies"][0];
  EXPECT_EQ(j["deployment"], "nemo-rl");
  // Deployed M2N pays per-call costs (launches, barriers) that the plan alone does not.
  EXPECT_GT(j["breakdown_s"]["fixed"].get<double>(), 0.0);
  EXPECT_FALSE(j["contributors"].empty());
  const auto bench = run_refit("simulate " + kProblem + " --strategy m2n-ring --deployment m2n-bench --json");
  ASSERT_EQ(bench.exit_code, 0) << bench.err;
  EXPECT_EQ(nlohmann::json::parse(bench.out)["strategies"][0]["deployment"], "m2n-bench");
}

TEST(SimulateCli, CompareShowsBaselinesAsDeployedAndExplainNamesContributors) {
  const auto all = run_refit("simulate " + kProblem + " --compare --json");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  std::set<std::pair<std::string, std::string>> rows;
  const auto j = nlohmann::json::parse(all.out);
  for (const auto& s : j["strategies"]) {
    rows.emplace(s["strategy"].get<std::string>(), s["deployment"].get<std::string>());
    EXPECT_TRUE(s.contains("time_vs_refit"));
  }
  EXPECT_EQ(rows, (std::set<std::pair<std::string, std::string>>{{"refit", "refit"},
                                                                 {"direct", "nemo-rl"},
                                                                 {"direct", "refit"},
                                                                 {"m2n-ring", "nemo-rl"},
                                                                 {"m2n-ring", "refit"},
                                                                 {"gather-broadcast", "nemo-rl"}}));
  const auto explained = run_refit("simulate " + kProblem + " --strategy gather-broadcast --explain");
  ASSERT_EQ(explained.exit_code, 0) << explained.err;
  EXPECT_NE(explained.out.find("biggest contributors"), std::string::npos) << explained.out;
  EXPECT_NE(explained.out.find("  1. "), std::string::npos) << explained.out;
}

// How often `text` holds `part`.
std::size_t occurrences(const std::string& text, const std::string& part) {
  std::size_t n = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + 1)) ++n;
  return n;
}

TEST(SimulateCli, AClustersAssumptionIsSaidOnceForEveryRow) {
  // dgx-h200: refit's copy kernel has no run on an H200, so every one of --compare's six rows
  // rests on the same assumed copy rate; stderr says it once, the JSON on every row, and topo
  // shows it with the cluster.
  std::string h200 = kProblem;
  h200.replace(h200.find("dgx-h100"), 8, "dgx-h200");
  const auto all = run_refit("simulate " + h200 + " --compare --json");
  ASSERT_EQ(all.exit_code, 0) << all.err;
  const std::string note = "pack/unpack on the H200 is charged at 1608 GB/s";
  EXPECT_EQ(occurrences(all.err, note), 1u) << all.err;
  for (const auto& s : nlohmann::json::parse(all.out)["strategies"])
    EXPECT_EQ(occurrences(s["notes"].dump(), note), 1u) << s.dump();
  const auto topo = run_refit("topo --cluster dgx-h200 --train-ranks 2 --infer-ranks 2");
  ASSERT_EQ(topo.exit_code, 0) << topo.err;
  EXPECT_EQ(occurrences(topo.out, "assumed: " + note), 1u) << topo.out;
}

TEST(SimulateCli, TraceIsChromeJsonWithGpuAndNicTracks) {
  const auto path = temp_file("trace.json");
  const auto r = run_refit("simulate " + kProblem + " --trace " + path.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::ifstream in(path);
  const auto trace = nlohmann::json::parse(in);
  std::set<std::string> tracks;
  int complete = 0;
  for (const auto& e : trace["traceEvents"]) {
    if (e["ph"] == "M" && e["name"] == "thread_name") tracks.insert(e["args"]["name"].get<std::string>());
    if (e["ph"] == "X") {
      ++complete;
      EXPECT_GE(e["dur"].get<double>(), 0.0);
    }
  }
  EXPECT_GT(complete, 0);
  EXPECT_TRUE(std::ranges::any_of(tracks, [](const std::string& t) { return t.starts_with("gpu "); }));
  EXPECT_TRUE(std::ranges::any_of(tracks, [](const std::string& t) { return t.starts_with("nic "); }));
  std::filesystem::remove(path);
}

TEST(SimulateCli, ARefusedSimulationLeavesTheTraceFileAsItWasAndNoInputIsWrittenOver) {
  // The trace is opened before --plan is read: a plan that is missing fails the run, and the file
  // --trace names keeps its old bytes (it was once emptied). An output naming an input is refused.
  const auto dir = temp_file("trace_dir");
  std::filesystem::create_directory(dir);
  const auto trace = dir / "keep.json";
  std::ofstream(trace) << "keep";
  const auto r = run_refit("simulate " + kProblem + " --plan " + (dir / "missing.json").string() +
                           " --trace " + trace.string());
  EXPECT_EQ(r.exit_code, 2) << r.err;
  std::ifstream in(trace);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(in), {}), "keep");
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), {}), 1) << "a temporary was left";
  for (const std::string& args :
       {"simulate " + kProblem + " --plan " + trace.string() + " --trace " + trace.string(),
        "plan --model " + trace.string() + " --train tp=1 --infer tp=1 --out " + trace.string()}) {
    const auto same = run_refit(args);
    EXPECT_EQ(same.exit_code, 2) << args << ": " << same.err;
    EXPECT_NE(same.err.find(trace.string() + " is the file"), std::string::npos) << same.err;
  }
  std::ifstream again(trace);
  EXPECT_EQ(std::string(std::istreambuf_iterator<char>(again), {}), "keep");
  std::filesystem::remove_all(dir);
}

struct BadInput {
  std::string args;
  std::string must_mention;
  friend void PrintTo(const BadInput& b, std::ostream* os) { *os << b.args; }
};

class PlanCliBadInput : public ::testing::TestWithParam<BadInput> {};

TEST_P(PlanCliBadInput, ExitsTwoNamingTheProblem) {
  const auto r = run_refit(GetParam().args);
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_NE(r.err.find(GetParam().must_mention), std::string::npos) << r.err;
}

INSTANTIATE_TEST_SUITE_P(
    Cases, PlanCliBadInput,
    ::testing::Values(
        BadInput{"plan " + kProblem + " --strategy fastest", "fastest"},
        // The cluster file has 4 GPUs; the problem needs 8 ranks.
        BadInput{"plan --model " + std::string(REFIT_TEST_DATA_DIR) +
                     "/models/tiny-qwen3-moe.json --train tp=2,ep=2,etp=1 --infer tp=2,dp=2 --cluster-file " +
                     REFIT_TEST_DATA_DIR + "/topology/cluster_small.json",
                 "placement: the file places 2 training + 2 inference ranks, the problem has 2 + 4"},
        BadInput{"plan --model no-such-model --train tp=1 --infer tp=1", "no-such-model"},
        BadInput{"simulate " + kProblem + " --compare --plan x.json", "--plan"},
        BadInput{"simulate " + kProblem + " --plan /nonexistent/plan.json", "plan"},
        BadInput{"simulate " + kProblem + " --window -1", "--window: must be >= 0, got -1"},
        BadInput{"simulate " + kProblem + " --deployment nemo-rl",
                 "deployment 'nemo-rl' does not run strategy 'refit'"},
        BadInput{"simulate " + kProblem + " --strategy gather-broadcast --deployment m2n-bench",
                 "deployment 'm2n-bench' does not run strategy 'gather-broadcast'"},
        BadInput{"simulate " + kProblem + " --deployment slurm", "slurm"},
        BadInput{"simulate " + kProblem + " --compare --deployment refit", "--deployment"},
        BadInput{"plan " + kProblem + " --chunk 0", "--chunk: must be > 0, got 0"},
        BadInput{"run " + kProblem + " --iterations 0", "--iterations: must be > 0, got 0"},
        BadInput{"run " + kProblem + " --timeout soon",
                 "--timeout: expected a number >= 0.1 and <= 1e+06, got 'soon'"},
        // Misspelt names are refused as options are read: before, `run` outside mpirun first
        // reported the process count, and inside it planned (or started an executor) first.
        BadInput{"run " + kProblem + " --strategy fastest",
                 "--strategy: unknown strategy 'fastest' (expected refit, direct"},
        BadInput{"run " + kProblem + " --executor tcp", "--executor: unknown executor 'tcp'"},
        BadInput{"run " + kProblem + " --verify --load-sources /tmp", "--load-sources excludes --verify"}));

}  // namespace
}  // namespace refit

namespace refit {
namespace {

// A llama whose every linear weight splits into whole 128x128 blocks at tp=2 (hidden 256,
// 4 heads of 64, intermediate 512), from Megatron TP2 to vLLM TP2xDP2 on 2-GPU nodes.
const std::string kBlocks = std::string("--model ") + REFIT_TEST_DATA_DIR +
                            "/models/small-llama-blocks.json --train tp=2 --infer tp=2,dp=2 "
                            "--cluster dgx-h100:gpus_per_node=2";

// The executors cut messages into chunks of at most half their staging (refit run --staging); the
// simulator lowers the plan as they do: 256 MiB (the default) leaves small-llama-blocks' messages
// whole, 64 KiB cuts them (more tasks), as refit run --staging 65536 would.
TEST(SimulateCli, StagingSetsTheChunksAsInTheExecutors) {
  const auto tasks = [&](const std::string& staging) {
    const auto r = run_refit("simulate " + kBlocks + staging + " --json");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return nlohmann::json::parse(r.out)["strategies"][0]["tasks"].get<int>();
  };
  EXPECT_EQ(tasks(""), tasks(" --staging 268435456"));
  EXPECT_GT(tasks(" --staging 65536"), tasks(""));
  EXPECT_EQ(run_refit("simulate " + kBlocks + " --staging 0").exit_code, 2);
}

// --staging is refit's executors': in a comparison it cuts the rows they run into more tasks and
// leaves the deployed baselines' rows (NeMo RL's) as they are, figure for figure.
TEST(SimulateCli, StagingIsRefitsExecutorsOwn) {
  const auto rows = [&](const std::string& staging) {
    const auto r = run_refit("simulate " + kBlocks + " --compare --jobs 1 --json" + staging);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, nlohmann::json> out;
    const auto j = nlohmann::json::parse(r.out);
    for (const auto& row : j["strategies"])
      out[row["strategy"].get<std::string>() + " as " + row["deployment"].get<std::string>()] = row;
    return out;
  };
  const auto wide = rows(""), narrow = rows(" --staging 65536");
  ASSERT_EQ(wide.size(), narrow.size());
  int refits = 0;
  for (const auto& [name, row] : wide) {
    if (row["deployment"] == "refit") {
      ++refits;
      EXPECT_GT(narrow.at(name)["tasks"].get<int>(), row["tasks"].get<int>()) << name;
    } else {
      EXPECT_EQ(narrow.at(name)["predicted_s"], row["predicted_s"]) << name;
      EXPECT_EQ(narrow.at(name)["tasks"], row["tasks"]) << name;
    }
  }
  EXPECT_EQ(refits, 3);  // refit, and direct's and m2n-ring's plans as refit's executors run them
}

TEST(PlanCli, QuantizeAtTheSenderHalvesTheLinearWeightsOnTheNetwork) {
  const auto bf16 = run_refit("plan " + kBlocks + " --json");
  const auto fp8 = run_refit("plan " + kBlocks + " --quantize fp8-block128 --json");
  ASSERT_EQ(fp8.exit_code, 0) << fp8.err;
  const auto a = nlohmann::json::parse(bf16.out), b = nlohmann::json::parse(fp8.out);
  // 2 layers x 7 linear weights get a scales tensor each: 21 + 14 tensors.
  EXPECT_EQ(b["tensors"].get<int>(), a["tensors"].get<int>() + 14);
  EXPECT_EQ(b["network_bytes_unquantized"], a["network_bytes"]);
  // Per layer the linear weights hold 4 x 256 x 256 + 3 x 512 x 256 = 655360 parameters, 1.31 M of
  // the model's 1.84 M; embedding and head (2 x 1024 x 256) stay bf16. Every byte crosses once
  // per inference replica alike, so fp8 leaves (1.31 + 2 x 0.52) / (2 x 1.84) = 0.64 of the bytes.
  EXPECT_LT(b["network_bytes"].get<double>(), 0.7 * a["network_bytes"].get<double>());
  EXPECT_GT(b["network_bytes"].get<double>(), 0.5 * a["network_bytes"].get<double>());
}

TEST(PlanCli, QuantizeRefusesAnInferenceLayoutThatCutsBlocks) {
  // tp=4 gives q_proj 64 rows a rank: half a 128-row block.
  const auto r = run_refit(std::string("plan --model ") + REFIT_TEST_DATA_DIR +
                           "/models/small-llama-blocks.json --train tp=2 --infer tp=4 --cluster dgx-h100 "
                           "--quantize fp8-block128");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--infer tp=4"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("q_proj.weight"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("whole blocks"), std::string::npos) << r.err;
  EXPECT_EQ(run_refit("plan " + kBlocks + " --quantize fp4").exit_code, 2);
}

TEST(PlanCli, QuantizeAtLandingSendsFp8OnFromOneReplica) {
  // Megatron tp=4 cuts q, k, v and o_proj (256 x 256) into 64-row (or column) parts, half a
  // 128-block: the senders quantize gate, up and down, and with --quantize-at sender those four go
  // bf16 to both engines (each in a domain of its own). At landing each reaches one engine in bf16, 131072
  // bytes, and the other as fp8 values and the 2 x 2 fp32 scales, 65536 + 16 bytes: per weight
  // 65520 bytes less, 2 layers x 4 weights x 65520 = 524160 bytes less on the network.
  const std::string problem = std::string("plan --model ") + REFIT_TEST_DATA_DIR +
                              "/models/small-llama-blocks.json --train tp=4 --infer tp=2,engines=2 "
                              "--cluster dgx-h100:gpus_per_domain=2 --quantize fp8-block128 --json";
  const auto sender = run_refit(problem + " --quantize-at sender");
  const auto landing = run_refit(problem);  // landing is the default
  ASSERT_EQ(landing.exit_code, 0) << landing.err;
  const auto a = nlohmann::json::parse(sender.out), b = nlohmann::json::parse(landing.out);
  EXPECT_EQ(a["network_bytes"].get<std::int64_t>() - b["network_bytes"].get<std::int64_t>(), 524160);
  EXPECT_EQ(b["network_bytes_unquantized"], a["network_bytes_unquantized"]);
  // 8 weights gain a scales tensor and a landing copy each.
  EXPECT_EQ(b["tensors"].get<int>(), a["tensors"].get<int>() + 16);
  const auto refused = run_refit(problem + " --quantize-at landing --strategy gather-broadcast");
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("training rank 0"), std::string::npos) << refused.err;
  // refit models counts them: 6 weights at the sender, 8 at landing ranks, 14 scales tensors.
  const auto models = run_refit(std::string("models ") + REFIT_TEST_DATA_DIR +
                                "/models/small-llama-blocks.json --train tp=4 --infer tp=2,engines=2 "
                                "--quantize fp8-block128 --quantize-at landing --json");
  ASSERT_EQ(models.exit_code, 0) << models.err;
  const auto q = nlohmann::json::parse(models.out)["quantization"];
  EXPECT_EQ(q["weights"]["sender"], 6);
  EXPECT_EQ(q["weights"]["landing"], 8);
  EXPECT_EQ(q["scales_tensors"], 14);
  const auto simulated = run_refit(std::string("simulate") + problem.substr(4) + " --quantize-at landing");
  ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
  EXPECT_GT(nlohmann::json::parse(simulated.out)["strategies"][0]["breakdown_s"]["quantize"].get<double>(),
            0);
}

TEST(SimulateCli, QuantizeChargesTheQuantizationWhereThePlanPutsIt) {
  for (const char* site : {"sender", "receiver"}) {
    const auto r = run_refit("simulate " + kBlocks + " --strategy refit --quantize mxfp8 --quantize-at " +
                             site + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.err;
    const auto j = nlohmann::json::parse(r.out)["strategies"][0];
    EXPECT_GT(j["breakdown_s"]["quantize"].get<double>(), 0) << site;
  }
}

TEST(SimulateCli, WeightsTrainedInFp8MoveAsTheyAreWithNothingToQuantize) {
  // --quantize-at training: the same fp8 values and scales cross as when the senders quantize,
  // but nobody quantizes them.
  const auto sender = run_refit("plan " + kBlocks + " --quantize fp8-block128 --json");
  const auto trained =
      run_refit("plan " + kBlocks + " --quantize fp8-block128 --quantize-at training --json");
  ASSERT_EQ(trained.exit_code, 0) << trained.err;
  EXPECT_EQ(nlohmann::json::parse(trained.out)["network_bytes"],
            nlohmann::json::parse(sender.out)["network_bytes"]);
  const auto r = run_refit("simulate " + kBlocks +
                           " --strategy refit --quantize fp8-block128 --quantize-at training --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(nlohmann::json::parse(r.out)["strategies"][0]["breakdown_s"]["quantize"].get<double>(), 0);
}

// The reference problems of the README's predictions table, and Qwen3-30B-A3B in NeMo RL's own
// layout (EP8xDP2 -> 8 engines of TP2).
struct ReferenceCase {
  const char* name;  // the test's name
  const char* args;  // refit simulate's problem and cluster
};
const ReferenceCase kReferenceProblems[] = {
    {"Qwen3_30B_EP8xPP2_to_2xTP8",
     "--model qwen3-30b-a3b --train ep=8,pp=2 --infer tp=8,engines=2 --cluster dgx-h100"},
    {"Qwen3_30B_EP8xDP16_to_8xTP2",
     "--model qwen3-30b-a3b --train ep=8,dp=16 --infer tp=2,engines=8 --cluster dgx-h100"},
    {"Qwen3_235B_to_16xTP8",
     "--model qwen3-235b-a22b --train tp=4,pp=8,ep=16,etp=1 --infer tp=8,engines=16 --cluster dgx-h100"},
    {"DeepSeekV3_DgxH100",
     "--model deepseek-v3 --train pp=16,ep=16 --infer tp=32,engines=8 --cluster dgx-h100"},
    {"DeepSeekV3_Gb200",
     "--model deepseek-v3 --train pp=16,ep=16 --infer tp=32,engines=8 --cluster "
     "gb200-nvl72:gpus_per_domain=64"},
    {"KimiK2_DgxH100", "--model kimi-k2 --train pp=16,ep=16 --infer tp=16,engines=8 --cluster dgx-h100"}};

nlohmann::json simulated_row(const std::string& args) {
  const auto r = run_refit("simulate " + args + " --json");
  EXPECT_EQ(r.exit_code, 0) << args << ": " << r.err;
  return r.exit_code == 0 ? nlohmann::json::parse(r.out)["strategies"][0] : nlohmann::json{};
}

// refit simulate ARGS's row takes from 1 to `most` times its bound.
void expect_near_bound(const std::string& args, double most) {
  const auto row = simulated_row(args);
  ASSERT_FALSE(row.is_null()) << args;
  EXPECT_GE(row["ratio_to_lower_bound"].get<double>(), 1.0) << args;
  EXPECT_LE(row["ratio_to_lower_bound"].get<double>(), most) << args;
}

TEST(SimulateCli, RelaysForwardTheirDataInTheOrderItLands) {
  // Qwen3-8B from TP8 to 3 engines of TP8: each inference GPU needs its TP shard (2.05 GB), which
  // one training GPU holds; the source sends it once, split over two engines, and they forward it
  // on. A forwarded relay once led with the lm_head slice, the last segment of its upstream to
  // land, so it sent nothing for 38 ms and the refit took 1.475x its bound (the single source
  // NIC's 2.05 GB); its segments now go in the order they land (1.07x).
  const auto row = simulated_row("--model qwen3-8b --train tp=8 --infer tp=8,engines=3 --cluster dgx-h100");
  ASSERT_FALSE(row.is_null());
  EXPECT_LE(row["ratio_to_lower_bound"].get<double>(), 1.10);
  // And a node the job half fills (two TP2 engines on the last node's first 4 GPUs) receives
  // through the 4 NICs of the job's GPUs there, which its bound counts (it once counted all 8).
  expect_near_bound("--model qwen3-30b-a3b --train ep=4,pp=4 --infer tp=2,engines=6 --cluster dgx-h100",
                    1.05);
}

TEST(SimulateCli, ADomainForwardsWhatSeveralSendersSendItAllAtOnce) {
  // Qwen3-30B-A3B from TP2xEP8xDP8 (2 nodes) to 8 engines of TP4 (4 nodes): each inference node
  // needs all 61.1 GB, 7.64 GB per NIC (the bound, 162.4 ms at 47 GB/s), and the 16 training
  // NICs can send only two copies, so the inference nodes forward the rest to each other. A
  // forwarding GPU takes what it forwards from 8 training GPUs at once, each at 1/8 of what
  // reaches it; its relays to the other nodes once went one upstream message at a time, so they
  // forwarded at one sender's share and the refit took 1.63x its bound (264.6 ms). Relays that
  // others forward from are cut into slices too now, each following one slice of one upstream,
  // so a pair forwards from all 8 as their data lands (1.09x).
  expect_near_bound("--model qwen3-30b-a3b --train tp=2,ep=8,dp=8 --infer tp=4,engines=8 --cluster dgx-h100",
                    1.15);
}

TEST(SimulateCli, InsideOneDomainWhatReplicasPassOnGoesFirst) {
  // Qwen3-30B-A3B's experts on 8 training GPUs (EP8) and 8 or 16 inference GPUs in one GB200 NVL72
  // domain: every expert has one holder, so it scatters slabs that the replicas pass on to each
  // other. The slabs once travelled in one message with the pieces that only land, behind them,
  // and the replicas sent nothing for most of the refit: 1.364x (EP8xDP8 -> 8 x TP2) and 1.461x
  // (EP8 -> 16 x TP1) the bound. The slabs now lead each pair's stream (1.002x, 1.001x).
  for (const char* args :
       {"--model qwen3-30b-a3b --train tp=1,ep=8,dp=8 --infer tp=2,engines=8 --cluster gb200-nvl72",
        "--model qwen3-30b-a3b --train ep=8 --infer tp=1,engines=16 --cluster gb200-nvl72"})
    expect_near_bound(args, 1.05);
}

TEST(SimulateCli, EnginesForwardWhatOtherReplicasSentThem) {
  // Llama-3.1-8B TP2xDP4 on one DGX H100 -> 4 engines of TP8 on 4 more: each source replica once
  // sent its own engine all 16.06 GB through its 2 NICs, 170.9 ms, 4.0x the bound (every engine
  // NIC takes in 2.01 GB: 42.7 ms). The engines now pass on what the other replicas sent them
  // (44.6 ms, 1.04x).
  expect_near_bound("--model llama-3.1-8b --train tp=2,dp=4 --infer tp=8,engines=4 --cluster dgx-h100", 1.10);
}

bool is_deepseek(const std::string& problem) { return problem.find("deepseek-v3") != std::string::npos; }

class ReferenceProblem : public ::testing::TestWithParam<ReferenceCase> {};

TEST_P(ReferenceProblem, RefitStaysWithinFivePercentOfItsBoundAndAheadOfOtherPlans) {
  // Issue 31's rules for refit as its executors run it, on every reference problem:
  // predicted / lower bound <= 1.05, and no other plan run by refit's executors is faster. The
  // network part of the bound is met in the fluid model once a sender's pairs share its NIC by
  // their bytes (lowering/pair_pacing.h); what is left is the NVLink relay of the last chunks to
  // land and the messages' latency. m2n-ring's plans of DeepSeek-V3 (about a million transfers,
  // 12 s each here) are left to bench/RESULTS.md to keep ./test short; gather-broadcast's plan,
  // 10^7 chunks through one rank's NIC, is slower by an order of magnitude.
  const std::string problem = GetParam().args;
  const auto refit = simulated_row(problem + " --strategy refit");
  ASSERT_FALSE(refit.is_null()) << problem;
  EXPECT_EQ(refit["deployment"], "refit") << problem;
  EXPECT_GE(refit["ratio_to_lower_bound"].get<double>(), 1.0) << problem;
  EXPECT_LE(refit["ratio_to_lower_bound"].get<double>(), 1.05) << problem;
  for (const std::string other : {"direct", "m2n-ring"}) {
    if (other == "m2n-ring" && is_deepseek(problem)) continue;
    const auto j = simulated_row(problem + " --strategy " + other + " --deployment refit");
    ASSERT_FALSE(j.is_null()) << problem << " " << other;
    EXPECT_LE(refit["predicted_s"].get<double>(), j["predicted_s"].get<double>()) << problem << ": " << other;
  }
}

INSTANTIATE_TEST_SUITE_P(SimulateCli, ReferenceProblem, ::testing::ValuesIn(kReferenceProblems),
                         [](const auto& info) { return std::string(info.param.name); });

// The reference problems in every FP8 mode their inference layout takes (an fp8-block128 engine
// needs whole 128x128 blocks on every rank: TP8 of Qwen3-30B-A3B's experts and TP32 of
// DeepSeek-V3's cut them, and vLLM refuses those too), quantized where the plan chooses
// (--quantize-at landing, the default: at the training ranks that hold whole blocks).
struct Fp8Case {
  const char* name;
  std::size_t problem;  // into kReferenceProblems
  const char* mode;     // --quantize
  // DeepSeek-V3's direct plan on refit's executors takes twice refit's time (bf16 above: 1.04 s
  // against 0.90 and 0.47 s) and 30 s to simulate here in FP8; it is compared where it is close.
  bool against_direct;
};
const Fp8Case kFp8Cases[] = {{"Qwen3_30B_EP8xPP2_to_2xTP8_Mxfp8", 0, "mxfp8", true},
                             {"Qwen3_30B_EP8xDP16_to_8xTP2_Fp8Block128", 1, "fp8-block128", true},
                             {"Qwen3_30B_EP8xDP16_to_8xTP2_Mxfp8", 1, "mxfp8", true},
                             {"Qwen3_235B_to_16xTP8_Mxfp8", 2, "mxfp8", true},
                             {"DeepSeekV3_DgxH100_Mxfp8", 3, "mxfp8", false},
                             {"DeepSeekV3_Gb200_Mxfp8", 4, "mxfp8", false},
                             {"KimiK2_DgxH100_Fp8Block128", 5, "fp8-block128", true},
                             {"KimiK2_DgxH100_Mxfp8", 5, "mxfp8", true}};

class ReferenceProblemInFp8 : public ::testing::TestWithParam<Fp8Case> {};

TEST_P(ReferenceProblemInFp8, RefitStaysNearItsBoundAndAheadOfTheDirectPlan) {
  // Issue 31's rules in FP8: bytes halve, so what the bound leaves out weighs double. A sender
  // quantizes box by box in the order its chunks first read them, each chunk waiting only for the
  // boxes it reads (lowering/sender_quantize_order.h): with every box quantized before the first
  // byte, Qwen3-30B-A3B EP8xDP16 -> 8 x TP2 took 1.10x its bound in fp8-block128. Landing GPUs
  // relay what lands in slices ordered by when their data lands, the last chunk of each message
  // alone (plan_builder.h): with whole late segments relayed after the network, that row took
  // 1.055x and DeepSeek-V3 on GB200 1.058x.
  // The direct plan on refit's executors (with equal pair shares it once beat refit's on Kimi-K2
  // in fp8-block128) is never faster.
  const auto& c = GetParam();
  const std::string problem = std::string(kReferenceProblems[c.problem].args) + " --quantize " + c.mode;
  const auto refit = simulated_row(problem + " --strategy refit");
  ASSERT_FALSE(refit.is_null()) << problem;
  EXPECT_GE(refit["ratio_to_lower_bound"].get<double>(), 1.0) << problem;
  EXPECT_LE(refit["ratio_to_lower_bound"].get<double>(), 1.05) << problem;
  if (!c.against_direct) return;
  const auto direct = simulated_row(problem + " --strategy direct --deployment refit");
  ASSERT_FALSE(direct.is_null()) << problem;
  EXPECT_LE(refit["predicted_s"].get<double>(), direct["predicted_s"].get<double>()) << problem;
}

INSTANTIATE_TEST_SUITE_P(SimulateCli, ReferenceProblemInFp8, ::testing::ValuesIn(kFp8Cases),
                         [](const auto& info) { return std::string(info.param.name); });

TEST(SimulateCli, GpusWithoutNvlinkInDomainsOfTheirOwnSimulate) {
  // nvlink_gbps 0 is allowed for a GPU without NVLink; the simulator once refused the cluster
  // that refit plan accepted ("capacity must be positive") for the NVLink it never used.
  const auto path = temp_file("pcie_box.json");
  std::ofstream(path) << R"({"name":"pcie-box","nvlink_latency_us":5,
 "gpus":[{"node":0,"domain":0,"nvlink_gbps":0,"copy_gbps":1450},{"node":0,"domain":1,"nvlink_gbps":0,"copy_gbps":1450},
         {"node":1,"domain":2,"nvlink_gbps":0,"copy_gbps":1450},{"node":1,"domain":3,"nvlink_gbps":0,"copy_gbps":1450}],
 "domains":[{"id":0,"gpus":[0]},{"id":1,"gpus":[1]},{"id":2,"gpus":[2]},{"id":3,"gpus":[3]}],
 "nics":[{"node":0,"gbps":47,"latency_us":15,"gpus":[0,1]},{"node":1,"gbps":47,"latency_us":15,"gpus":[2,3]}]})";
  const auto r = run_refit("simulate --manifest " + std::string(REFIT_TEST_DATA_DIR) +
                           "/manifests/readme_example.json --cluster-file " + path.string() + " --json");
  std::filesystem::remove(path);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(nlohmann::json::parse(r.out)["strategies"][0]["predicted_s"].get<double>(), 0);
}

TEST(ModelsCli, Mxfp8ParametersOfTheFrameworksAreRefusedUnlessQuantizedAtTheReceiver) {
  // vLLM's MXFP8 loads bf16 and quantizes itself: no fp8 parameters to write, whether the senders
  // quantize or training did; at the receiver, bf16 parameters.
  const std::string models =
      std::string("models ") + REFIT_TEST_DATA_DIR +
      "/models/small-llama-blocks.json --train tp=2 --infer tp=2,dp=2 --storage --quantize mxfp8";
  for (const char* site : {"sender", "training"}) {
    const auto r = run_refit(models + " --quantize-at " + site);
    EXPECT_EQ(r.exit_code, 2) << site;
    EXPECT_NE(r.err.find("vLLM keeps no MXFP8 parameters"), std::string::npos) << r.err;
  }
  EXPECT_EQ(run_refit(models + " --quantize-at receiver").exit_code, 0);
}

TEST(ModelsCli, QuantizeSaysHowManyWeightsAreQuantizedWhere) {
  // small-llama-blocks: 2 layers x 7 linear weights, each with whole blocks at tp=2.
  const auto r =
      run_refit(std::string("models ") + REFIT_TEST_DATA_DIR +
                "/models/small-llama-blocks.json --train tp=2 --infer tp=2,dp=2 --quantize fp8-block128 "
                "--quantize-at training --json");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto q = nlohmann::json::parse(r.out)["quantization"];
  EXPECT_EQ(q["scheme"], "fp8-block128");
  EXPECT_EQ(q["weights"]["training"], 14);
  EXPECT_EQ(q["weights"]["sender"], 0);
  EXPECT_EQ(q["scales_tensors"], 14);
}

// Every plan `refit plan --out` writes, `refit simulate --plan` takes (the same problem options):
// every strategy x every quantization site (and none), at a --chunk of its own (a baseline's plan
// is recognised at the chunk it was made with; m2n-ring cuts its ring steps at 256 KiB whatever it). A
// baseline's plan that moves fp8 before the engines is predicted as refit's executors run it, saying so; it
// used to be refused ("plan has 35 tensors, the problem 21": the simulator re-planned the problem quantized
// at the receivers).
TEST(PlanCli, EveryPlanThatPlanWritesIsOneSimulateTakes) {
  const auto path = temp_file("round-trip.json");
  for (const char* strategy : {"refit", "direct", "m2n-ring", "gather-broadcast"})
    for (const std::string quantize :
         {"", " --quantize fp8-block128", " --quantize fp8-block128 --quantize-at sender",
          " --quantize fp8-block128 --quantize-at receiver",
          " --quantize fp8-block128 --quantize-at training", " --quantize mxfp8 --quantize-at receiver"}) {
      SCOPED_TRACE(std::string(strategy) + quantize);
      const auto planned = run_refit("plan " + kBlocks + quantize + " --strategy " + strategy +
                                     " --chunk 65536 --out " + path.string());
      if (planned.exit_code != 0) {  // gather-broadcast sends from rank 0: no landing ranks
        EXPECT_EQ(planned.exit_code, 2) << planned.err;
        continue;
      }
      const auto simulated =
          run_refit("simulate " + kBlocks + quantize + " --plan " + path.string() + " --json");
      ASSERT_EQ(simulated.exit_code, 0) << simulated.err;
      const auto row = nlohmann::json::parse(simulated.out)["strategies"][0];
      EXPECT_EQ(row["strategy"], strategy);
      const bool before_engines = !quantize.empty() && quantize.find("receiver") == std::string::npos &&
                                  quantize.find("training") == std::string::npos;
      EXPECT_EQ(row["deployment"], before_engines || std::string(strategy) == "refit" ? "refit" : "nemo-rl");
    }
  std::filesystem::remove(path);
}

// A plan file's label is checked against what it moves: refit's plan relabelled gather-broadcast
// was predicted as NeMo RL's broadcast (1.84 ms instead of 65 us); now it is refused, and so is a
// refit plan that names the collectives' execution model.
TEST(PlanCli, APlanWhoseLabelIsNotWhatItMovesIsRefused) {
  const auto path = temp_file("relabelled.json");
  ASSERT_EQ(run_refit("plan " + kBlocks + " --out " + path.string()).exit_code, 0);
  const auto relabel = [&](const std::string& strategy, const std::string& model) {
    auto j = nlohmann::json::parse(std::ifstream(path));
    j["strategy"] = strategy;
    j["execution_model"] = model;
    std::ofstream(path) << j.dump();
    return run_refit("simulate " + kBlocks + " --plan " + path.string());
  };
  const auto broadcast = relabel("gather-broadcast", "nccl-collectives");
  EXPECT_EQ(broadcast.exit_code, 2);
  EXPECT_NE(broadcast.err.find("it says strategy 'gather-broadcast', but its transfers are not what "
                               "gather-broadcast plans for this problem and cluster"),
            std::string::npos)
      << broadcast.err;
  const auto collectives = relabel("refit", "nccl-collectives");
  EXPECT_EQ(collectives.exit_code, 2);
  EXPECT_NE(collectives.err.find("strategy 'refit' is run by refit's executors, not by the execution model "
                                 "'nccl-collectives'"),
            std::string::npos)
      << collectives.err;
  // A label that is no strategy at all (the format says "the strategy that made it").
  const auto bogus = relabel("bogus", "refit-ucx");
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("strategy: 'bogus' is none of refit's strategies (refit, "), std::string::npos)
      << bogus.err;
  EXPECT_EQ(relabel("refit", "refit-nccl").exit_code, 0);
  std::filesystem::remove(path);
}

}  // namespace
}  // namespace refit
