// `refit calibrate` under mpirun, with small sizes: it writes a cluster file the simulator takes,
// refuses to overwrite one, and a plan simulated on the calibrated cluster and executed on this
// host gives both reports under the same breakdown names. Whether their figures agree is the
// calibration matrix's question (bench/calibration_matrix.py), not a test's: it depends on the
// machine's load.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <set>

#include <nlohmann/json.hpp>

#include "mpirun.h"
#include "refit/core/quantization.h"
#include "refit/topology/cluster_json.h"
#include "run_cli.h"

namespace refit {
namespace {

const std::string kModels = std::string(REFIT_TEST_DATA_DIR) + "/models/";

// mpirun -np N refit calibrate ARGS, as users start it.
testing::ShellResult calibrate(int np, const std::string& args) {
  return testing::run_shell(std::string(testing::kMpiEnvironment) + "timeout -k 5 60 " + REFIT_MPIEXEC +
                            " --oversubscribe -np " + std::to_string(np) + " " + REFIT_CLI_PATH +
                            " calibrate " + args);
}

// Small enough to be quick, far enough apart (0.3 ms against several ms on any host) that the time
// grows with the size even on a loaded machine: calibrate refuses measurements where it does not.
// The overhead size moves the larger size again in 128 chunks of 256 KiB instead of 4 of 8 MiB,
// the transfer size again as 16 transfers of 2 MiB. In cache, 64 KiB and 4 MiB, the latter also
// in 16 chunks and as 16 transfers.
const std::string kSmall =
    "--sizes 65536,33554432 --overhead-sizes 33554432 --transfer-sizes 33554432 --cache-sizes 65536,4194304 "
    "--cache-overhead-sizes 4194304 --cache-transfer-sizes 4194304 --transfers 16 --repetitions 3 "
    "--memcpy-bytes 1048576 --devices 6";

class CalibratedHost : public ::testing::Test {
 protected:
  void SetUp() override {
    file_ =
        std::filesystem::temp_directory_path() / ("refit_calibrated_" + std::to_string(::getpid()) + ".json");
    std::filesystem::remove(file_);
  }
  void TearDown() override { std::filesystem::remove(file_); }
  std::filesystem::path file_;
};

TEST_F(CalibratedHost, CalibrateWritesAClusterFileOfTheHostTheSimulatorTakes) {
  const auto r = calibrate(4, kSmall + " --json --out " + file_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_EQ(j["processes"], 4);
  ASSERT_EQ(j["one_pair"].size(), 4u);
  EXPECT_EQ(j["one_pair"][1]["chunks"], 4);      // 32 MiB in chunks of 8 MiB (PlanOptions::chunk)
  EXPECT_EQ(j["one_pair"][2]["chunks"], 128);    // the same in chunks of 256 KiB (--overhead-chunk)
  EXPECT_EQ(j["one_pair"][3]["transfers"], 16);  // the same as 16 tensors of 2 MiB, a transfer each
  EXPECT_EQ(j["one_pair"][3]["chunks"], 16);
  for (const auto i : {1, 2}) EXPECT_EQ(j["one_pair"][i]["transfers"], 1);
  EXPECT_GE(j["chunk_overhead_s"].get<double>(), 0);
  EXPECT_GE(j["transfer_overhead_s"].get<double>(), 0);
  EXPECT_EQ(j["all_pairs"]["pairs"], 2);  // 4 processes: 2 pairs at once
  EXPECT_GT(j["pair_gbps"].get<double>(), 0);
  EXPECT_GE(j["latency_s"].get<double>(), 0);
  // refit's CPU quantizer in each format, which the file keeps.
  const auto& q = j["quantize_gbps"];
  EXPECT_GT(q["fp8-block128"].get<double>(), 0);
  EXPECT_GT(q["mxfp8"].get<double>(), 0);
  EXPECT_NE(r.err.find("refit calibrate: 1 pair x 65536 bytes"), std::string::npos) << r.err;  // progress
  // No GPU here: the output says what was skipped.
  EXPECT_NE(j["notes"].dump().find("NCCL"), std::string::npos);

  // 6 devices, one per process, each its own domain, behind one link; each held to a pair's
  // bandwidth: the link's bandwidth / oversubscription = pair_gbps when the host is faster.
  const auto file = load_cluster_file(file_);
  ASSERT_TRUE(file) << file.error().message;
  const auto& c = file->cluster;
  EXPECT_EQ(c.gpus().size(), 6u);
  EXPECT_EQ(c.domains().size(), 6u);
  ASSERT_EQ(c.nics().size(), 1u);
  EXPECT_EQ(c.nics()[0].gpus.size(), 6u);
  EXPECT_NEAR(c.nics()[0].bandwidth.gbps() / c.fabric().oversubscription, j["pair_gbps"].get<double>(),
              1e-6 * j["pair_gbps"].get<double>());
  for (const QuantScheme s : all_quant_schemes()) {
    const double measured = q[std::string(quant_scheme_name(s))].get<double>();
    EXPECT_NEAR(of_scheme(c.gpus()[0].quantize_bandwidth, s).gbps(), measured, 1e-6 * measured);
  }
  EXPECT_NEAR(c.nics()[0].chunk_overhead.value, j["chunk_overhead_s"].get<double>(), 1e-12);
  EXPECT_NEAR(c.nics()[0].transfer_overhead.value, j["transfer_overhead_s"].get<double>(), 1e-12);

  // The in-cache line, for refits of at most the 4 MiB pair's 8 MiB of shards; or, where this
  // host's noise gave no line, a note that says so and no cache.
  if (j["cache"].is_null()) {
    EXPECT_NE(j["notes"].dump().find("the in-cache transfers gave no line"), std::string::npos) << r.out;
    EXPECT_TRUE(c.spec().caches.empty());
  } else {
    ASSERT_EQ(j["cache"]["one_pair"].size(), 4u);
    EXPECT_EQ(j["cache"]["one_pair"][2]["chunks"], 16);
    EXPECT_EQ(j["cache"]["one_pair"][3]["transfers"], 16);
    ASSERT_EQ(c.spec().caches.size(), 1u);
    const auto& cache = c.spec().caches[0];
    EXPECT_EQ(cache.capacity.value, 8 << 20);
    EXPECT_EQ(j["cache"]["capacity_bytes"], 8 << 20);
    EXPECT_NEAR(cache.copy_bandwidth.gbps(), j["cache"]["memcpy_gbps"].get<double>(), 1e-9);
    EXPECT_NEAR(cache.nic_latency.value, j["cache"]["latency_s"].get<double>(), 1e-12);
    EXPECT_NEAR(cache.transfer_overhead.value, j["cache"]["transfer_overhead_s"].get<double>(), 1e-12);
  }

  const auto again = calibrate(2, kSmall + " --out " + file_.string());
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("--overwrite"), std::string::npos) << again.err;
}

TEST_F(CalibratedHost, WithoutInCacheSizesTheFileHasNoCacheAndSaysSo) {
  const auto r =
      calibrate(2,
                "--sizes 65536,33554432 --overhead-sizes none --transfer-sizes none --cache-sizes none "
                "--repetitions 1 "
                "--memcpy-bytes 1048576 --json --out " +
                    file_.string());
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_object()) << r.out;
  EXPECT_TRUE(j["cache"].is_null());
  EXPECT_NE(j["notes"].dump().find("no in-cache sizes"), std::string::npos) << j["notes"].dump();
  const auto file = load_cluster_file(file_);
  ASSERT_TRUE(file) << file.error().message;
  EXPECT_TRUE(file->cluster.spec().caches.empty());
}

TEST_F(CalibratedHost, InCacheSizesThatGiveNoLineAreRefusedNamingThem) {
  const auto one = calibrate(
      2, "--cache-sizes 65536 --cache-overhead-sizes none --cache-transfer-sizes none --repetitions 1");
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.err.find("cache sizes: a line needs at least two distinct sizes, got 1"), std::string::npos)
      << one.err;
  const auto orphan = calibrate(2, "--cache-sizes none --cache-overhead-sizes 4194304 --repetitions 1");
  EXPECT_NE(orphan.exit_code, 0);
  EXPECT_NE(orphan.err.find("cache overhead sizes: given without cache sizes"), std::string::npos)
      << orphan.err;
  const auto orphan_transfers =
      calibrate(2, "--cache-sizes none --cache-transfer-sizes 4194304 --repetitions 1");
  EXPECT_NE(orphan_transfers.exit_code, 0);
  EXPECT_NE(orphan_transfers.err.find("cache transfer sizes: given without cache sizes"), std::string::npos)
      << orphan_transfers.err;
}

TEST_F(CalibratedHost, TransferSizesThatDoNotCutIntoEqualTensorsAreRefusedNamingThem) {
  // 1,000,000 bytes are 500,000 bf16 elements, which 3 tensors do not share equally.
  const auto uneven = calibrate(2, "--transfer-sizes 1000000 --transfers 3 --repetitions 1");
  EXPECT_NE(uneven.exit_code, 0);
  EXPECT_NE(uneven.err.find("transfer sizes: 1000000 bytes do not cut into 3 bf16 tensors of equal size"),
            std::string::npos)
      << uneven.err;
  const auto one = calibrate(2, "--transfers 1 --repetitions 1");
  EXPECT_NE(one.exit_code, 0);
  EXPECT_NE(one.err.find("transfers: 1 is not in [2, 4096]"), std::string::npos) << one.err;
}

TEST_F(CalibratedHost, AnOddNumberOfProcessesIsRefusedNamingIt) {
  const auto r = calibrate(3, kSmall);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("an even number of at least 2, got 3"), std::string::npos) << r.err;
}

TEST_F(CalibratedHost, AnOverheadChunkNoSmallerThanRefitsIsRefusedNamingIt) {
  // 8 MiB is the chunk refit plans: the overhead sizes would go in as few chunks as the others.
  const auto r = calibrate(2, "--overhead-chunk 8388608 --repetitions 1");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("overhead chunk: 8388608 bytes is not smaller than the chunk refit plans"),
            std::string::npos)
      << r.err;
}

TEST_F(CalibratedHost, AMemcpyPastTheHostsMemoryOrTooManyDevicesAreRefusedBeforeMeasuring) {
  // 2^62 bytes copied between two buffers is more than any host holds; every rank refuses it at
  // once (exit 2) instead of rank 0 running out of memory while rank 1 waits for it. 2^20 devices
  // is the most ranks refit plans for.
  const auto memcpy = calibrate(2, "--memcpy-bytes 4611686018427387904");
  EXPECT_EQ(memcpy.exit_code, 2) << memcpy.err;
  EXPECT_NE(memcpy.err.find("memcpy bytes: 4611686018427387904 bytes twice over is more than this host's"),
            std::string::npos)
      << memcpy.err;
  const auto devices = calibrate(2, "--devices 1048577");
  EXPECT_EQ(devices.exit_code, 2) << devices.err;
  EXPECT_NE(devices.err.find("--devices: must be in [1, 1048576], got 1048577"), std::string::npos)
      << devices.err;
  // One byte a chunk cuts the default 64 MiB overhead size into 2^26 puts (once more than 100 s
  // of calibrating): at most 2^16, so at least 1024 bytes.
  const auto chunk = calibrate(2, "--overhead-chunk 1");
  EXPECT_EQ(chunk.exit_code, 2) << chunk.err;
  EXPECT_NE(chunk.err.find("overhead chunk: 1 bytes cuts the overhead size of 67108864 bytes into 67108864 "
                           "chunks, more than 65536: take a chunk of at least 1024 bytes"),
            std::string::npos)
      << chunk.err;
}

std::set<std::string> keys(const nlohmann::json& object) {
  std::set<std::string> out;
  for (const auto& [key, _] : object.items()) out.insert(key);
  return out;
}

TEST_F(CalibratedHost, APlanSimulatedOnItAndRunReportTheSameBreakdownNames) {
  ASSERT_EQ(calibrate(2, kSmall + " --out " + file_.string()).exit_code, 0);
  const std::string problem = "--model " + kModels +
                              "tiny-llama.json --train tp=2 --infer tp=2 --cluster-file " + file_.string() +
                              " --strategy refit";
  const auto predicted = testing::run_refit("simulate " + problem + " --deployment refit --json");
  ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
  const auto run = testing::refit_run(4, problem + " --iterations 2 --verify --json --timeout 20");
  ASSERT_EQ(run.exit_code, 0) << run.err;
  const auto p = nlohmann::json::parse(predicted.out)["strategies"][0]["breakdown_s"];
  const auto m = nlohmann::json::parse(run.out);
  EXPECT_EQ(m["verified"], true);
  // The same names: the simulator's TimeKinds, one spelling.
  EXPECT_EQ(keys(p), keys(m["breakdown_s"]));
  // Every kind the run did not time is null and says why; every other is a time.
  for (const auto& [kind, seconds] : m["breakdown_s"].items()) {
    if (seconds.is_null())
      EXPECT_TRUE(m["breakdown_not_timed"].contains(kind)) << kind;
    else
      EXPECT_GE(seconds.get<double>(), 0) << kind;
  }
  // Each process is a domain of its own: the puts cross the calibrated link ("network").
  EXPECT_GT(m["breakdown_s"]["network"].get<double>(), 0);
}

// What the simulator moves is what the executor moves, byte for byte, for every strategy's plan
// as refit's executors run it: the bytes over the links it models (network and NVLink) sum to the
// bytes the ranks sent (gather-broadcast's relays count their hops in both).
TEST_F(CalibratedHost, APlanSimulatedOnItAndRunMoveTheSameBytes) {
  ASSERT_EQ(calibrate(2, kSmall + " --out " + file_.string()).exit_code, 0);
  for (const std::string strategy : {"refit", "direct", "m2n-ring", "gather-broadcast"}) {
    SCOPED_TRACE(strategy);
    const std::string problem = "--model " + kModels +
                                "tiny-llama.json --train tp=2 --infer tp=2 --cluster-file " + file_.string() +
                                " --strategy " + strategy;
    const auto predicted = testing::run_refit("simulate " + problem + " --deployment refit --json");
    ASSERT_EQ(predicted.exit_code, 0) << predicted.err;
    const auto run = testing::refit_run(4, problem + " --verify --json --timeout 20");
    ASSERT_EQ(run.exit_code, 0) << run.err;
    const auto p = nlohmann::json::parse(predicted.out)["strategies"][0];
    const auto m = nlohmann::json::parse(run.out);
    EXPECT_EQ(m["verified"], true);
    std::int64_t sent = 0;
    for (const auto& rank : m["per_rank"]) sent += rank["bytes_sent"].get<std::int64_t>();
    EXPECT_GT(sent, 0);
    EXPECT_EQ(p["network_bytes"].get<std::int64_t>() + p["nvlink_bytes"].get<std::int64_t>(), sent);
  }
}

}  // namespace
}  // namespace refit
