// refit calibrate: measure this host's links with refit's own executor between the processes
// mpirun started, and write them as a cluster file that `refit simulate` and `refit run` take.
//
//   mpirun -np 4 refit calibrate --out host.json [--overwrite] [--sizes B,B,...] [--repetitions N]
//                                [--overhead-sizes B,...] [--overhead-chunk B] [--devices N]
//                                [--cache-sizes B,...] [--cache-overhead-sizes B,...]
//                                [--transfer-sizes B,...] [--cache-transfer-sizes B,...]
//                                [--transfers N] [--memcpy-bytes B] [--timeout S] [--json]
//
// The measuring is the library's (refit/facade/calibration.h); this prints it, on rank 0.
#include <filesystem>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "command.h"
#include "human_units.h"
#include "json_text.h"
#include "parse.h"
#include "refit/core/checked.h"
#include "refit/core/text_file.h"
#include "refit/core/try.h"
#include "refit/executors/mpi_bootstrap.h"
#include "refit/executors/registry.h"
#include "refit/executors/sequenced_bootstrap.h"
#include "refit/facade/calibration.h"
#include "refit/topology/cluster_json.h"
#include "run_mpi_session.h"
#include "say.h"
#include "transport_messages.h"

namespace refit::cli {
namespace {

struct CalibrateOptions {
  CalibrationOptions calibration;
  std::string sizes;
  std::string overhead_sizes;
  std::string cache_sizes;
  std::string cache_overhead_sizes;
  std::string transfer_sizes;
  std::string cache_transfer_sizes;
  std::int64_t overhead_chunk = CalibrationOptions{}.overhead_chunk.value;
  std::int64_t memcpy_bytes = CalibrationOptions{}.memcpy_bytes.value;
  double timeout = ExecutorOptions{}.timeout.value;
  std::string out;
  bool overwrite = false;
  bool json = false;
};

double gbps(BytesPerSecond b) { return b.gbps(); }

nlohmann::ordered_json measurement_json(const PairMeasurement& m) {
  return {{"bytes", m.bytes.value},
          {"pairs", m.pairs},
          {"transfers", m.transfers},
          {"chunks", m.chunks},
          {"seconds", m.seconds.value}};
}

// refit's CPU quantizer per format, as the cluster file holds it.
nlohmann::ordered_json quantize_json(const Calibration& c) {
  nlohmann::ordered_json out;
  for (const QuantScheme s : all_quant_schemes())
    out[std::string(quant_scheme_name(s))] = gbps(of_scheme(c.quantize_by_scheme, s));
  return out;
}

nlohmann::ordered_json measurements_json(const std::vector<PairMeasurement>& points) {
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (const auto& m : points) out.push_back(measurement_json(m));
  return out;
}

nlohmann::ordered_json cache_json(const std::optional<CacheCalibration>& cache) {
  if (!cache) return nullptr;
  return {{"one_pair", measurements_json(cache->one_pair)},
          {"latency_s", cache->pair.latency.value},
          {"chunk_overhead_s", cache->pair.chunk_overhead.value},
          {"transfer_overhead_s", cache->pair.transfer_overhead.value},
          {"pair_gbps", gbps(cache->pair.bandwidth)},
          {"fit_worst_relative_residual", cache->pair.worst_relative_residual},
          {"memcpy_gbps", gbps(cache->memcpy_bandwidth)},
          {"capacity_bytes", cache->capacity.value}};
}

nlohmann::ordered_json calibration_json(const Calibration& c, const std::string& out) {
  return {{"processes", c.processes},
          {"cores", c.cores},
          {"one_pair", measurements_json(c.one_pair)},
          {"latency_s", c.pair.latency.value},
          {"chunk_overhead_s", c.pair.chunk_overhead.value},
          {"transfer_overhead_s", c.pair.transfer_overhead.value},
          {"pair_gbps", gbps(c.pair.bandwidth)},
          {"fit_worst_relative_residual", c.pair.worst_relative_residual},
          {"all_pairs", c.all_pairs ? measurement_json(*c.all_pairs) : nlohmann::ordered_json()},
          {"host_gbps", gbps(c.host_bandwidth)},
          {"memcpy_gbps", gbps(c.memcpy_bandwidth)},
          {"quantize_gbps", quantize_json(c)},
          {"cache", cache_json(c.cache)},
          {"devices", c.cluster.gpus.size()},
          {"oversubscription", c.cluster.fabric.oversubscription},
          {"notes", c.notes},
          {"cluster_file", out.empty() ? nlohmann::ordered_json() : nlohmann::ordered_json(out)}};
}

void print_points(const std::vector<PairMeasurement>& points) {
  for (const auto& m : points)
    fmt::print("  one pair, {:>10} in {:>3} transfer{}, {:>4} chunk{}: {}\n", human(m.bytes), m.transfers,
               m.transfers == 1 ? " " : "s", m.chunks, m.chunks == 1 ? " " : "s", human(m.seconds));
}

void print_line(std::string_view label, const PairFit& fit) {
  fmt::print(
      "{:<11} t = {} + transfers x {} + chunks x {} + bytes / {:.2f} GB/s (worst point {:.1f} % off the "
      "fit)\n",
      label, human(fit.latency), human(fit.transfer_overhead), human(fit.chunk_overhead), gbps(fit.bandwidth),
      100 * fit.worst_relative_residual);
}

void print_calibration(const Calibration& c, const std::string& out) {
  fmt::print("refit calibrate: {} processes on {} cores, UCX executor, host memory\n", c.processes, c.cores);
  print_points(c.one_pair);
  print_line("fit", c.pair);
  if (c.all_pairs)
    fmt::print("all pairs   {} pairs x {} at once: {}: host {:.2f} GB/s ({:.2f}x one pair)\n",
               c.all_pairs->pairs, human(c.all_pairs->bytes), human(c.all_pairs->seconds),
               gbps(c.host_bandwidth), c.host_bandwidth.value / c.pair.bandwidth.value);
  fmt::print("memcpy      {:.2f} GB/s (one core)\n", gbps(c.memcpy_bandwidth));
  if (c.cache) {
    print_points(c.cache->one_pair);
    print_line("in cache", c.cache->pair);
    fmt::print("            memcpy {:.2f} GB/s; for a refit whose shards on the host are at most {}\n",
               gbps(c.cache->memcpy_bandwidth), human(c.cache->capacity));
  }
  for (const QuantScheme s : all_quant_schemes())
    fmt::print("quantize    {:.2f} GB/s of bf16 to {} (refit's CPU quantizer, one core)\n",
               gbps(of_scheme(c.quantize_by_scheme, s)), quant_scheme_name(s));
  fmt::print(
      "cluster     {} devices, one per process, behind one shared-memory link of {:.2f} GB/s, each "
      "at most {:.2f} GB/s (fabric oversubscription {:.2f}), each quantizing at the rates above\n",
      c.cluster.gpus.size(), gbps(c.host_bandwidth), gbps(c.pair.bandwidth),
      c.cluster.fabric.oversubscription);
  for (const auto& n : c.notes) fmt::print("note        {}\n", n);
  if (!out.empty()) fmt::print("wrote       {}\n", out);
}

[[nodiscard]] Result<void> write_cluster(const Calibration& c, const std::string& out) {
  const auto cluster = REFIT_TRY(Cluster::make(c.cluster));
  REFIT_TRY_IN(write_file(out, [&](std::ostream& s) { s << json_text(cluster_to_json(cluster), 2) << '\n'; }),
               "--out");
  return {};
}

[[nodiscard]] Result<void> check_out(const CalibrateOptions& o) {
  std::error_code ec;
  if (!o.out.empty() && !o.overwrite && std::filesystem::exists(o.out, ec))
    return invalid(fmt::format("--out {}: the file exists; pass --overwrite to replace it", o.out));
  return {};
}

// A list of sizes given as `flag` replaces `sizes`: "none" empties it; not given, it stays.
[[nodiscard]] Result<void> read_sizes(const std::string& text, std::string_view flag,
                                      std::vector<Bytes>& sizes) {
  if (text.empty()) return {};
  sizes.clear();
  if (text != "none")
    for (const auto b : REFIT_TRY(parse_int_list(text, flag, 2))) sizes.emplace_back(b);
  return {};
}

[[nodiscard]] Result<void> calibrate_here(CalibrateOptions o) {
  REFIT_TRY(check_out(o));
  REFIT_TRY(read_sizes(o.sizes, "--sizes", o.calibration.streaming.sizes));
  REFIT_TRY(read_sizes(o.overhead_sizes, "--overhead-sizes", o.calibration.streaming.overhead_sizes));
  REFIT_TRY(read_sizes(o.cache_sizes, "--cache-sizes", o.calibration.in_cache.sizes));
  REFIT_TRY(
      read_sizes(o.cache_overhead_sizes, "--cache-overhead-sizes", o.calibration.in_cache.overhead_sizes));
  REFIT_TRY(read_sizes(o.transfer_sizes, "--transfer-sizes", o.calibration.streaming.transfer_sizes));
  REFIT_TRY(
      read_sizes(o.cache_transfer_sizes, "--cache-transfer-sizes", o.calibration.in_cache.transfer_sizes));
  // No in-cache line: its default overhead and transfer sizes go with it.
  if (o.cache_sizes == "none") {
    if (o.cache_overhead_sizes.empty()) o.calibration.in_cache.overhead_sizes.clear();
    if (o.cache_transfer_sizes.empty()) o.calibration.in_cache.transfer_sizes.clear();
  }
  o.calibration.overhead_chunk = Bytes{o.overhead_chunk};
  o.calibration.memcpy_bytes = Bytes{o.memcpy_bytes};
  o.calibration.executor_options.timeout = Seconds{o.timeout};
  o.calibration.executor_options.on_transport_message = print_transport_message;
  MpiSession mpi;
  if (!mpi.ok()) return fail(ErrorCode::kRuntime, "MPI_Init failed (start refit calibrate with mpirun)");
  auto mpi_bootstrap = REFIT_TRY(MpiBootstrap::create(MPI_COMM_WORLD, Seconds{o.timeout}));
  SequencedBootstrap bootstrap(mpi_bootstrap);
  if (bootstrap.rank() == 0)
    o.calibration.progress = [](std::string_view line) { say("refit calibrate: {}\n", line); };
  auto measured = calibrate(bootstrap, o.calibration);
  if (!measured) {
    if (mpi_bootstrap.broken()) mpi.abandon();
    return std::unexpected(std::move(measured).error().in(fmt::format("rank {}", bootstrap.rank())));
  }
  if (bootstrap.rank() != 0) return {};
  if (!o.out.empty()) REFIT_TRY(write_cluster(*measured, o.out));
  if (o.json)
    fmt::print("{}\n", json_text(calibration_json(*measured, o.out)));
  else
    print_calibration(*measured, o.out);
  return {};
}

// "262144,1048576": sizes as the options take them.
std::string size_list(const std::vector<Bytes>& sizes) {
  std::vector<std::int64_t> values;
  for (const Bytes b : sizes) values.push_back(b.value);
  return fmt::format("{}", fmt::join(values, ","));
}

// The sizes each line moves, with their defaults from CalibrationOptions.
void add_size_options(CLI::App& cmd, CalibrateOptions& o) {
  const CalibrationOptions d;
  cmd.add_option(
      "--sizes", o.sizes,
      fmt::format("Bytes one pair moves, each cut into chunks as refit plans them; even, at least two "
                  "distinct (default {}); every pair at once then moves the largest",
                  size_list(d.streaming.sizes)));
  cmd.add_option("--overhead-sizes", o.overhead_sizes,
                 fmt::format("Bytes one pair moves again in chunks of --overhead-chunk, to tell the sender's "
                             "time per chunk from the bandwidth; even (default {}); none: not measured, the "
                             "file charges no overhead",
                             size_list(d.streaming.overhead_sizes)));
  cmd.add_option(
      "--cache-sizes", o.cache_sizes,
      fmt::format("Bytes one pair moves with shards that stay in this core's caches between "
                  "executions, as a small refit's do: a second line, which the file applies to "
                  "refits whose shards on the host are at most the largest size's pair (its source "
                  "and destination); even, at least two distinct (default {}); none: not measured, "
                  "every refit predicted at the streaming figures",
                  size_list(d.in_cache.sizes)));
  cmd.add_option(
      "--cache-overhead-sizes", o.cache_overhead_sizes,
      fmt::format("In-cache bytes one pair moves again in chunks of --overhead-chunk (default {}); "
                  "none: no overhead in cache",
                  size_list(d.in_cache.overhead_sizes)));
  cmd.add_option(
      "--transfer-sizes", o.transfer_sizes,
      fmt::format("Bytes one pair moves again as --transfers equal bf16 tensors, a transfer each "
                  "(as the direct strategy plans them), to tell the sender's time per transfer; each "
                  "a multiple of 2 x --transfers (default {}); none: not measured, the file charges "
                  "none",
                  size_list(d.streaming.transfer_sizes)));
  cmd.add_option(
      "--cache-transfer-sizes", o.cache_transfer_sizes,
      fmt::format("In-cache bytes one pair moves again as --transfers tensors; each a multiple of 2 "
                  "x --transfers (default {}); none: no transfer overhead in cache",
                  size_list(d.in_cache.transfer_sizes)));
  cmd.add_option(
         "--transfers", o.calibration.transfers,
         fmt::format("The tensors, a transfer each, a transfer size is cut into (default {})", d.transfers))
      ->check(positive());
  cmd.add_option("--overhead-chunk", o.overhead_chunk,
                 fmt::format("Chunk of the --overhead-sizes transfers in bytes (default {}, m2n-ring's)",
                             d.overhead_chunk.value))
      ->check(positive());
}

}  // namespace

Action add_calibrate_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  auto* cmd = app.add_subcommand(
      "calibrate",
      "Measure this host's links with refit's own UCX executor between the processes of an mpirun "
      "job (an even number; 4 or more also measure every pair at once), memcpy and refit's CPU FP8 "
      "quantizer (in each format, which the file keeps), and write a "
      "cluster file that predicts refits on this host. t = latency + transfers x transfer overhead + "
      "chunks x chunk overhead + bytes / bandwidth for one pair's transfers of several sizes: the "
      "sender's own time per chunk from what some took more cut in small chunks, its own time per "
      "transfer from what one took more as many tensors, a transfer each, then the line through the "
      "sizes as refit cuts them (least squares of the relative error); every "
      "pair at once gives what the host's cores reach together, which the file models as one "
      "shared link that caps each process at one pair's bandwidth (more processes than cores, "
      "taking turns on them, are not modelled: predict jobs within the cores). Small transfers again, whose "
      "shards stay in the caches, give a "
      "second line and memcpy, which the file applies to refits as small (in cache, copies run "
      "faster). Launch it as the jobs it predicts are launched (e.g. mpirun "
      "--bind-to none for all). Progress goes to stderr. The GPU's kernels and NCCL are not "
      "measured here, and the output says so; refit topo --discover --measure times the kernels and "
      "the NCCL executor's own costs on each GPU");
  cmd->add_option("--out", o->out, "Write the cluster file (the format of refit topo --json) here")
      ->check(output_file());
  cmd->add_flag("--overwrite", o->overwrite, "Replace the --out file if it exists (refused otherwise)");
  cmd->add_option("--executor", o->calibration.executor, "Executor to measure with (default ucx)")
      ->check(accepted_by(check_executor_name, "EXECUTOR"));
  add_size_options(*cmd, *o);
  const CalibrationOptions defaults;
  cmd->add_option("--repetitions", o->calibration.repetitions,
                  fmt::format("Timed executions per measurement, after one warm-up; the median is kept "
                              "(default {})",
                              defaults.repetitions))
      ->check(positive());
  cmd->add_option(
         "--devices", o->calibration.devices,
         fmt::format("Processes the cluster file describes: the largest job it can predict (default {})",
                     defaults.devices))
      ->check(count_within(1, limits::kMaxRanks));
  cmd->add_option(
         "--memcpy-bytes", o->memcpy_bytes,
         fmt::format("Bytes of the memcpy measurement and of the bf16 weight quantized (default {} MiB)",
                     defaults.memcpy_bytes.value >> 20))
      ->check(positive());
  cmd->add_option(
         "--timeout", o->timeout,
         fmt::format("Longest wait on a peer, in seconds (default {:g})", ExecutorOptions{}.timeout.value))
      ->check(seconds_within(kMinTimeout, kMaxTimeout));
  cmd->add_flag("--json", o->json, "Print one JSON object on stdout (rank 0)");
  return [o] { return calibrate_here(*o); };
}

}  // namespace refit::cli
