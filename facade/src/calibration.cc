// Measuring this host with refit's own executor, on every rank alike (calibration.h).
#include "refit/facade/calibration.h"
#include "refit/core/elapsed.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "refit/executors/pattern.h"
#include "refit/quantize/quantize.h"
#include "refit/refit.h"
#include "refit/topology/discovery.h"

namespace refit {
namespace {

std::uint32_t usable_cores() {
  cpu_set_t set;
  CPU_ZERO(&set);
  return sched_getaffinity(0, sizeof(set), &set) == 0 ? static_cast<std::uint32_t>(CPU_COUNT(&set)) : 0;
}

// `pairs` pairs, each one training rank sending its own row of `bytes` to one inference rank; the
// job has world / 2 ranks on each side and the others hold nothing.
[[nodiscard]] Result<ReshardProblem> pairs_problem(std::int32_t world, std::int32_t pairs, Bytes bytes) {
  const std::int32_t side = world / 2;
  const Shape shape{pairs, bytes.value / dtype_size(DType::kBF16)};
  std::vector<Rank> senders, receivers;
  for (std::int32_t p = 0; p < pairs; ++p) {
    senders.emplace_back(p);
    receivers.emplace_back(side + p);
  }
  auto spec = REFIT_TRY(make_tensor_spec("calibration", shape, DType::kBF16));
  auto from = REFIT_TRY(Layout::make(shape, REFIT_TRY(Mesh::make({pairs}, senders)), {Placement::shard(0)}));
  auto to = REFIT_TRY(Layout::make(shape, REFIT_TRY(Mesh::make({pairs}, receivers)), {Placement::shard(0)}));
  return ReshardProblem::make({{std::move(spec), std::move(from), std::move(to)}}, side, world - side);
}

// The slowest rank's execute() of each repetition, from a common barrier, after one warm-up; the
// destinations cleared before each as `refit run --iterations` clears them, around the cache, so
// that the sender's stores do not wait for lines left dirty in this core's cache (HostShards).
[[nodiscard]] Result<Seconds> time_executions(Bootstrap& bootstrap, Executor& executor,
                                              PreparedPlan& prepared, HostShards& shards,
                                              std::int32_t repetitions) {
  REFIT_TRY(executor.execute(prepared));
  std::vector<Seconds> slowest;
  for (std::int32_t i = 0; i < repetitions; ++i) {
    shards.clear_destinations();
    REFIT_TRY(bootstrap.barrier());
    const auto start = SteadyClock::now();
    REFIT_TRY(executor.execute(prepared));
    const auto all = REFIT_TRY(bootstrap.allgather(fmt::format("{}", seconds_since(start).value)));
    Seconds worst{0};
    for (const auto& text : all) worst = std::max(worst, Seconds{std::stod(text)});
    slowest.push_back(worst);
  }
  return median_time(std::move(slowest));
}

// Each pair moves `bytes` in chunks of `chunk` (refit plans PlanOptions::chunk).
[[nodiscard]] Result<PairMeasurement> measure_pairs(Bootstrap& bootstrap, Executor& executor,
                                                    const CalibrationOptions& o, std::int32_t pairs,
                                                    Bytes bytes, Bytes chunk = PlanOptions{}.chunk) {
  const auto problem = REFIT_TRY(pairs_problem(bootstrap.size(), pairs, bytes));
  const auto cluster = REFIT_TRY(load_cluster({.preset = "cpu-host"}, job_of(problem)));
  const auto made = REFIT_TRY(plan(problem, cluster.placed, "refit", {.chunk = chunk}));
  // As the executor cuts them (at most half its staging, on 16-byte boundaries): what ran.
  const Transfer& first = made.transfers.front();
  const std::int64_t chunks = lowering::MessageLayout::count_chunks(
      made, first, lowering::chunk_limit(first, o.executor_options.staging));
  const Rank me{bootstrap.rank()};
  auto shards = REFIT_TRY(
      HostShards::allocate(problem, me, [&executor](Bytes b) { return executor.allocate_host(b); }));
  auto prepared = REFIT_TRY(executor.prepare(made, me, shards.buffers()));
  const auto seconds = REFIT_TRY(time_executions(bootstrap, executor, *prepared, shards, o.repetitions));
  if (bootstrap.rank() == 0 && o.progress)
    o.progress(fmt::format("{} pair{} x {} bytes in {} chunk{}: {:.1f} us", pairs, pairs == 1 ? "" : "s",
                           bytes.value, chunks, chunks == 1 ? "" : "s", seconds.value * 1e6));
  return PairMeasurement{.bytes = bytes, .pairs = pairs, .seconds = seconds, .chunks = chunks};
}

// Rank 0 alone times `work` (after one untimed run that touches every page); every rank learns the
// median.
template <class Work>
[[nodiscard]] Result<Seconds> time_on_rank_zero(Bootstrap& bootstrap, std::int32_t repetitions, Work work) {
  Seconds mine{0};
  if (bootstrap.rank() == 0) {
    work();
    std::vector<Seconds> times;
    for (std::int32_t i = 0; i < repetitions; ++i) {
      const auto start = SteadyClock::now();
      work();
      times.push_back(seconds_since(start));
    }
    mine = median_time(std::move(times));
  }
  const auto all = REFIT_TRY(bootstrap.allgather(fmt::format("{}", mine.value)));
  return Seconds{std::stod(all.front())};
}

// Rank 0 copies `bytes` alone while the others wait; every rank learns its median.
[[nodiscard]] Result<BytesPerSecond> measure_memcpy(Bootstrap& bootstrap, std::int32_t repetitions,
                                                    Bytes bytes) {
  const auto n = static_cast<std::size_t>(bootstrap.rank() == 0 ? bytes.value : 0);
  std::vector<std::byte> from(n, std::byte{1}), to(n, std::byte{0});
  const Seconds s =
      REFIT_TRY(time_on_rank_zero(bootstrap, repetitions, [&] { std::memcpy(to.data(), from.data(), n); }));
  return BytesPerSecond{static_cast<double>(bytes.value) / s.value};
}

// One pair moves each of `line`'s sizes in refit's chunks, and its overhead sizes also in chunks of
// the overhead chunk (again in refit's where the sizes lack them: the pair tells the overhead).
[[nodiscard]] Result<std::vector<PairMeasurement>> measure_line(Bootstrap& bootstrap, Executor& executor,
                                                                const CalibrationOptions& o,
                                                                const LineSizes& line) {
  std::vector<PairMeasurement> points;
  for (const Bytes b : line.sizes) points.push_back(REFIT_TRY(measure_pairs(bootstrap, executor, o, 1, b)));
  for (const Bytes b : line.overhead_sizes)
    if (std::ranges::find(line.sizes, b) == line.sizes.end())
      points.push_back(REFIT_TRY(measure_pairs(bootstrap, executor, o, 1, b)));
  for (const Bytes b : line.overhead_sizes)
    points.push_back(REFIT_TRY(measure_pairs(bootstrap, executor, o, 1, b, o.overhead_chunk)));
  return points;
}

// refit's CPU quantizer, as the UCX executor runs it, on rank 0: a contiguous bf16 weight of
// about `memcpy_bytes` (2048 columns, a DeepSeek-V3 expert's width) holding the weight pattern
// refit run quantizes, into fp8 values and scales; bf16 bytes read per second.
[[nodiscard]] Result<BytesPerSecond> measure_quantize(Bootstrap& bootstrap, const CalibrationOptions& o,
                                                      QuantScheme scheme) {
  constexpr std::int64_t kColumns = 2048;
  const std::int64_t rows = std::max<std::int64_t>(1, o.memcpy_bytes.value / (2 * kColumns));
  const Shape shape{rows, kColumns};
  std::vector<std::uint16_t> weight;
  std::vector<std::uint8_t> values;
  std::vector<std::byte> scales;
  if (bootstrap.rank() == 0) {
    weight.resize(static_cast<std::size_t>(rows * kColumns));
    fill_bf16_weight_pattern(0, shape, Box::whole(shape), std::as_writable_bytes(std::span(weight)));
    values.resize(weight.size());
    scales.resize(static_cast<std::size_t>(scale_buffer_bytes(scheme, shape)));
  }
  const Bf16View view{.data = weight.data(), .shape = shape, .strides = {kColumns, 1}};
  const Seconds s =
      REFIT_TRY(time_on_rank_zero(bootstrap, o.repetitions, [&] { quantize(scheme, view, values, scales); }));
  return BytesPerSecond{static_cast<double>(2 * rows * kColumns) / s.value};
}

// Even sizes within bounds, at least two distinct for a line (`optional`: or none at all).
[[nodiscard]] Result<void> check_line_sizes(const LineSizes& line, std::string_view name, bool optional) {
  std::set<Bytes> distinct;
  for (const auto& [what, sizes] :
       {std::pair{"sizes", &line.sizes}, std::pair{"overhead sizes", &line.overhead_sizes}})
    for (const Bytes b : *sizes) {
      if (b.value < 2 || b.value % 2 != 0 || b > limits::kMaxCalibrationBytes)
        return invalid(fmt::format("{}{}: {} bytes is not an even size in [2, {}]", name, what, b.value,
                                   limits::kMaxCalibrationBytes.value));
      distinct.insert(b);
    }
  if (line.sizes.empty() && !line.overhead_sizes.empty())
    return invalid(fmt::format("{}overhead sizes: given without {}sizes, which the overhead is fitted with",
                               name, name));
  if (distinct.size() < 2 && !(optional && distinct.empty()))
    return invalid(
        fmt::format("{}sizes: a line needs at least two distinct sizes, got {}", name, distinct.size()));
  return {};
}

[[nodiscard]] Result<void> check_calibration_options(const Bootstrap& bootstrap,
                                                     const CalibrationOptions& o) {
  if (bootstrap.size() < 2 || bootstrap.size() % 2 != 0)
    return invalid(fmt::format("calibration pairs processes up: start an even number of at least 2, got {}",
                               bootstrap.size()));
  if (o.repetitions < 1) return invalid(fmt::format("repetitions: must be >= 1, got {}", o.repetitions));
  if (o.memcpy_bytes.value < 1)
    return invalid(fmt::format("memcpy bytes: must be >= 1, got {}", o.memcpy_bytes.value));
  REFIT_TRY(check_line_sizes(o.streaming, "", false));
  REFIT_TRY(check_line_sizes(o.in_cache, "cache ", true));
  if (!o.streaming.overhead_sizes.empty() || !o.in_cache.overhead_sizes.empty()) {
    REFIT_TRY_IN(check_chunk(o.overhead_chunk), "overhead chunk");
    if (o.overhead_chunk >= PlanOptions{}.chunk)
      return invalid(fmt::format(
          "overhead chunk: {} bytes is not smaller than the chunk refit plans ({} bytes): the overhead sizes "
          "would go in as few chunks as the others and tell nothing",
          o.overhead_chunk.value, PlanOptions{}.chunk.value));
  }
  return {};
}

// What this calibration leaves out: the GPU's kernels and NCCL, measured only where a GPU is.
std::vector<std::string> gpu_notes() {
  const auto found = discover_cluster({});
  const bool gpu = found && std::ranges::any_of(found->cluster.gpus(),
                                                [](const GpuSpec& g) { return !g.pci_bus_id.empty(); });
  if (!gpu)
    return {
        "no GPU on this host: the GPU's copy and quantize kernels and NCCL were skipped; the "
        "file describes host memory moved by the UCX executor"};
  return {
      "this host has a GPU, but refit calibrate measures host memory only (the file describes host "
      "memory moved by the UCX executor): `refit topo --discover --measure` times refit's copy and "
      "quantize kernels on the GPUs; NCCL is not measured"};
}

// What a line's overhead fit leaves uncharged, if anything; `name` says which line.
std::optional<std::string> overhead_note(std::string_view name, const LineSizes& line, const PairFit& fit) {
  if (line.overhead_sizes.empty())
    return fmt::format(
        "no {}overhead sizes: the sender's time per chunk was not measured, and the file charges none", name);
  if (!fit.overhead_told)
    return fmt::format(
        "the {}overhead sizes went in as many chunks as in refit's (no larger than the overhead chunk): the "
        "sender's time per chunk was not told apart, and the file charges none",
        name);
  if (fit.chunk_overhead.value == 0)
    return fmt::format(
        "the {}sender's time per chunk came out negative or could not be told from the bandwidth (noise) "
        "and is taken as 0; the line without it is fitted",
        name);
  return std::nullopt;
}

// Every pair at once moves the largest streaming size; the host's bandwidth is their bytes over
// the time less one latency and each sender's own chunks' overhead.
[[nodiscard]] Result<void> measure_host(Bootstrap& bootstrap, Executor& executor, const CalibrationOptions& o,
                                        Calibration& c) {
  const std::int32_t pairs = bootstrap.size() / 2;
  c.all_pairs = REFIT_TRY(measure_pairs(bootstrap, executor, o, pairs, std::ranges::max(o.streaming.sizes)));
  const Seconds overhead{static_cast<double>(c.all_pairs->chunks) * c.pair.chunk_overhead.value};
  const Seconds moving = c.all_pairs->seconds - c.pair.latency - overhead;
  if (!(moving.value > 0))
    return fail(
        ErrorCode::kRuntime,
        fmt::format("every pair at once took {} s, no more than one message's latency ({} s) and "
                    "its {} chunks' overhead ({} s): the measurements are noise",
                    c.all_pairs->seconds.value, c.pair.latency.value, c.all_pairs->chunks, overhead.value));
  c.host_bandwidth = BytesPerSecond{static_cast<double>(c.all_pairs->bytes.value) * pairs / moving.value};
  return {};
}

// The in-cache regime, unless its sizes are not asked for; a line that cannot be fitted (noise)
// leaves it out and says so, since the streaming figures still predict every refit.
[[nodiscard]] Result<void> measure_cache(Bootstrap& bootstrap, Executor& executor,
                                         const CalibrationOptions& o, Calibration& c) {
  if (o.in_cache.sizes.empty()) {
    c.notes.push_back("no in-cache sizes: the file predicts every refit at the streaming figures");
    return {};
  }
  auto points = REFIT_TRY(measure_line(bootstrap, executor, o, o.in_cache));
  // Every rank fits the same points, so every rank takes the same branch.
  auto fit = fit_pair(points);
  if (!fit) {
    c.notes.push_back(fmt::format(
        "the in-cache transfers gave no line ({}): the file predicts every refit at the streaming figures",
        fit.error().message));
    return {};
  }
  if (auto note = overhead_note("in-cache ", o.in_cache, *fit)) c.notes.push_back(std::move(*note));
  // The capacity is what the largest in-cache pair held: its source and its destination.
  const Bytes largest = std::ranges::max(points, {}, &PairMeasurement::bytes).bytes;
  c.cache = CacheCalibration{.one_pair = std::move(points),
                             .pair = *fit,
                             .memcpy_bandwidth = REFIT_TRY(measure_memcpy(bootstrap, o.repetitions, largest)),
                             .capacity = largest * 2};
  return {};
}

}  // namespace

Result<Calibration> calibrate(Bootstrap& bootstrap, const CalibrationOptions& o) {
  REFIT_TRY(check_calibration_options(bootstrap, o));
  auto executor = REFIT_TRY_IN(make_executor(o.executor, bootstrap, o.executor_options), "--executor");
  Calibration c{.processes = bootstrap.size(), .cores = usable_cores(), .notes = gpu_notes()};
  c.one_pair = REFIT_TRY(measure_line(bootstrap, *executor, o, o.streaming));
  c.pair = REFIT_TRY(fit_pair(c.one_pair));
  if (auto note = overhead_note("", o.streaming, c.pair)) c.notes.push_back(std::move(*note));
  c.host_bandwidth = c.pair.bandwidth;
  if (bootstrap.size() > 2)
    REFIT_TRY(measure_host(bootstrap, *executor, o, c));
  else
    c.notes.push_back(
        "one pair only (2 processes): every pair at once was not measured, so the host's bandwidth is "
        "taken to be one pair's; start 4 or more processes to measure it");
  REFIT_TRY(measure_cache(bootstrap, *executor, o, c));
  c.memcpy_bandwidth = REFIT_TRY(measure_memcpy(bootstrap, o.repetitions, o.memcpy_bytes));
  for (const auto scheme : all_quant_schemes())
    of_scheme(c.quantize_by_scheme, scheme) = REFIT_TRY(measure_quantize(bootstrap, o, scheme));
  c.cluster = REFIT_TRY(calibrated_cluster(o.devices, c.pair, c.host_bandwidth, c.memcpy_bandwidth,
                                           c.quantize_by_scheme, c.cache));
  return c;
}

}  // namespace refit
