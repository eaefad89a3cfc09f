// Measuring this host with refit's own executor, on every rank alike (calibration.h).
#include "refit/facade/calibration.h"
#include "refit/core/elapsed.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <iterator>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/executors/agreement.h"
#include "refit/executors/host_memory.h"
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

// `pairs` pairs, each one training rank sending its own rows of `bytes` in all to one inference
// rank, a row of each of `tensors` equal tensors; the job has world / 2 ranks on each side and the
// others hold nothing.
[[nodiscard]] Result<ReshardProblem> pairs_problem(std::int32_t world, std::int32_t pairs, Bytes bytes,
                                                   std::int32_t tensors) {
  const std::int32_t side = world / 2;
  const Shape shape{pairs, bytes.value / tensors / dtype_size(DType::kBF16)};
  std::vector<Rank> senders, receivers;
  for (std::int32_t p = 0; p < pairs; ++p) {
    senders.emplace_back(p);
    receivers.emplace_back(side + p);
  }
  const auto from_mesh = REFIT_TRY(Mesh::make({pairs}, senders));
  const auto to_mesh = REFIT_TRY(Mesh::make({pairs}, receivers));
  std::vector<TensorReshard> weights;
  for (std::int32_t i = 0; i < tensors; ++i)
    weights.push_back(
        {REFIT_TRY(make_tensor_spec(tensors == 1 ? "calibration" : fmt::format("calibration.{}", i), shape,
                                    DType::kBF16)),
         REFIT_TRY(Layout::make(shape, from_mesh, {Placement::shard(0)})),
         REFIT_TRY(Layout::make(shape, to_mesh, {Placement::shard(0)}))});
  return ReshardProblem::make(std::move(weights), side, world - side);
}

// How a pair's bytes go: in chunks of `chunk` (refit plans PlanOptions::chunk), as `transfers`
// tensors, a transfer each (the direct strategy's plan), or as one (refit's).
struct Cut {
  Bytes chunk = PlanOptions{}.chunk;
  std::int32_t transfers = 1;
};

// One cut of each pair's bytes, prepared on this rank's shards; `measured` has its time once timed.
struct ReadyCut {
  PairMeasurement measured;
  HostShards shards;
  std::unique_ptr<PreparedPlan> prepared;
};

// Each pair's `bytes` as `cut` says, planned and prepared.
[[nodiscard]] Result<ReadyCut> prepare_cut(Bootstrap& bootstrap, Executor& executor,
                                           const CalibrationOptions& o, std::int32_t pairs, Bytes bytes,
                                           Cut cut) {
  const auto problem = REFIT_TRY(pairs_problem(bootstrap.size(), pairs, bytes, cut.transfers));
  const auto cluster = REFIT_TRY(load_cluster({.preset = "cpu-host"}, job_of(problem)));
  const auto made =
      REFIT_TRY(plan(problem, cluster.placed, cut.transfers == 1 ? "refit" : "direct", {.chunk = cut.chunk}));
  // The first pair's, as the executor cuts them (at most half its staging, on 16-byte
  // boundaries): what runs.
  PairMeasurement m{.bytes = bytes, .pairs = pairs, .chunks = 0, .transfers = 0};
  for (const Transfer& t : made.transfers)
    if (t.sender == made.transfers.front().sender) {
      m.chunks += lowering::MessageLayout::count_chunks(made, t,
                                                        lowering::chunk_limit(t, o.executor_options.staging));
      ++m.transfers;
    }
  const Rank me{bootstrap.rank()};
  auto shards = REFIT_TRY(
      HostShards::allocate(problem, me, [&executor](Bytes b) { return executor.allocate_host(b); }));
  auto prepared = REFIT_TRY(executor.prepare(made, me, shards.buffers()));
  return ReadyCut{.measured = m, .shards = std::move(shards), .prepared = std::move(prepared)};
}

// The slowest rank's execute() of each repetition, from a common barrier, after one warm-up; the
// destinations cleared before each as `refit run --iterations` clears them, around the cache, so
// that the sender's stores do not wait for lines left dirty in this core's cache (HostShards).
// The cuts take turns in each repetition, so that a host that speeds up or slows down as it stays
// busy (a VM's does, by a fifth) changes them alike and their differences, which tell the
// overheads, stay the cuts'. Each cut's time is the median of its repetitions.
[[nodiscard]] Result<void> time_executions(Bootstrap& bootstrap, Executor& executor, std::span<ReadyCut> cuts,
                                           std::int32_t repetitions) {
  for (auto& c : cuts) REFIT_TRY(executor.execute(*c.prepared));
  std::vector<std::vector<Seconds>> slowest(cuts.size());
  for (std::int32_t i = 0; i < repetitions; ++i)
    for (std::size_t k = 0; k < cuts.size(); ++k) {
      cuts[k].shards.clear_destinations();
      REFIT_TRY(bootstrap.barrier());
      const auto start = SteadyClock::now();
      REFIT_TRY(executor.execute(*cuts[k].prepared));
      const auto all = REFIT_TRY(bootstrap.allgather(fmt::format("{}", seconds_since(start).value)));
      Seconds worst{0};
      for (const auto& text : all) worst = std::max(worst, Seconds{std::stod(text)});
      slowest[k].push_back(worst);
    }
  for (std::size_t k = 0; k < cuts.size(); ++k) cuts[k].measured.seconds = median_time(std::move(slowest[k]));
  return {};
}

// Each pair moves `bytes` in each of `cuts`, the cuts taking turns: a measurement per cut.
[[nodiscard]] Result<std::vector<PairMeasurement>> measure_cuts(Bootstrap& bootstrap, Executor& executor,
                                                                const CalibrationOptions& o,
                                                                std::int32_t pairs, Bytes bytes,
                                                                const std::vector<Cut>& cuts) {
  std::vector<ReadyCut> ready;
  for (const Cut& cut : cuts)
    ready.push_back(REFIT_TRY(prepare_cut(bootstrap, executor, o, pairs, bytes, cut)));
  REFIT_TRY(time_executions(bootstrap, executor, ready, o.repetitions));
  std::vector<PairMeasurement> out;
  for (const auto& r : ready) {
    const PairMeasurement& m = r.measured;
    if (bootstrap.rank() == 0 && o.progress)
      o.progress(fmt::format("{} pair{} x {} bytes in {} transfer{}, {} chunk{}: {:.1f} us", pairs,
                             pairs == 1 ? "" : "s", bytes.value, m.transfers, m.transfers == 1 ? "" : "s",
                             m.chunks, m.chunks == 1 ? "" : "s", m.seconds.value * 1e6));
    out.push_back(m);
  }
  return out;
}

// Each pair moves `bytes` as `cut` says (refit's cut by default).
[[nodiscard]] Result<PairMeasurement> measure_pairs(Bootstrap& bootstrap, Executor& executor,
                                                    const CalibrationOptions& o, std::int32_t pairs,
                                                    Bytes bytes, Cut cut = {}) {
  return REFIT_TRY(measure_cuts(bootstrap, executor, o, pairs, bytes, {cut})).front();
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

// How a line's cuts of one size are timed.
enum class Turns {
  // Execution by execution, so that the host's drift while busy changes them alike: streaming,
  // where each execution goes through memory anyway.
  kTaken,
  // Each cut's repetitions after the other's: in cache, where each cut's shards must stay in the
  // caches between its own executions, which other cuts' shards in between would evict on a host
  // whose caches hold one cut's shards and not all of them.
  kOneAfterTheOther,
};

// One pair moves each of `line`'s sizes in refit's cut, its overhead sizes also in chunks of the
// overhead chunk and its transfer sizes also in many transfers, each beside refit's cut of the same
// bytes (measured whether or not among the sizes): the pair tells the overhead.
[[nodiscard]] Result<std::vector<PairMeasurement>> measure_line(Bootstrap& bootstrap, Executor& executor,
                                                                const CalibrationOptions& o,
                                                                const LineSizes& line, Turns turns) {
  std::vector<Bytes> sizes = line.sizes;
  for (const auto* extra : {&line.overhead_sizes, &line.transfer_sizes})
    for (const Bytes b : *extra)
      if (std::ranges::find(sizes, b) == sizes.end()) sizes.push_back(b);
  std::vector<PairMeasurement> points;
  for (const Bytes b : sizes) {
    std::vector<Cut> cuts{Cut{}};
    if (std::ranges::find(line.overhead_sizes, b) != line.overhead_sizes.end())
      cuts.push_back({.chunk = o.overhead_chunk});
    if (std::ranges::find(line.transfer_sizes, b) != line.transfer_sizes.end())
      cuts.push_back({.transfers = o.transfers});
    if (turns == Turns::kTaken)
      std::ranges::move(REFIT_TRY(measure_cuts(bootstrap, executor, o, 1, b, cuts)),
                        std::back_inserter(points));
    else
      for (const Cut& cut : cuts)
        points.push_back(REFIT_TRY(measure_pairs(bootstrap, executor, o, 1, b, cut)));
  }
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
       {std::pair{"sizes", &line.sizes}, std::pair{"overhead sizes", &line.overhead_sizes},
        std::pair{"transfer sizes", &line.transfer_sizes}})
    for (const Bytes b : *sizes) {
      if (b.value < 2 || b.value % 2 != 0 || b > limits::kMaxCalibrationBytes)
        return invalid(fmt::format("{}{}: {} bytes is not an even size in [2, {}]", name, what, b.value,
                                   limits::kMaxCalibrationBytes.value));
      distinct.insert(b);
    }
  for (const auto& [what, sizes] :
       {std::pair{"overhead sizes", &line.overhead_sizes}, std::pair{"transfer sizes", &line.transfer_sizes}})
    if (line.sizes.empty() && !sizes->empty())
      return invalid(
          fmt::format("{}{}: given without {}sizes, which the overhead is fitted with", name, what, name));
  if (distinct.size() < 2 && !(optional && distinct.empty()))
    return invalid(
        fmt::format("{}sizes: a line needs at least two distinct sizes, got {}", name, distinct.size()));
  return {};
}

// Each transfer size cut into `transfers` whole bf16 tensors of equal size.
[[nodiscard]] Result<void> check_transfer_sizes(const CalibrationOptions& o) {
  if (o.streaming.transfer_sizes.empty() && o.in_cache.transfer_sizes.empty()) return {};
  if (o.transfers < 2 || o.transfers > limits::kMaxCalibrationTransfers)
    return invalid(fmt::format("transfers: {} is not in [2, {}] (the transfers a transfer size is cut into)",
                               o.transfers, limits::kMaxCalibrationTransfers));
  for (const auto& [name, line] : {std::pair{"", &o.streaming}, std::pair{"cache ", &o.in_cache}})
    for (const Bytes b : line->transfer_sizes)
      if (b.value % (std::int64_t{2} * o.transfers) != 0)
        return invalid(fmt::format("{}transfer sizes: {} bytes do not cut into {} bf16 tensors of equal size",
                                   name, b.value, o.transfers));
  return {};
}

// Rank 0 copies between two buffers of `bytes` and quantizes a bf16 weight of as many: checked
// against its host's memory before anything is measured.
[[nodiscard]] Result<void> check_memcpy_memory(Bytes bytes) {
  const Bytes physical = physical_memory();
  if (bytes.value > physical.value / 2)
    return out_of_range(
        fmt::format("memcpy bytes: {} bytes twice over is more than this host's {} bytes of "
                    "memory",
                    bytes.value, physical.value));
  return check_host_memory(Bytes{2 * bytes.value}, /*shared=*/false, read_host_memory_limits(),
                           "memcpy bytes");
}

// A put per chunk, each timed over the repetitions: past this many chunks a size takes minutes (one
// byte a chunk once ran for longer than 100 s) and tells no more about the time per chunk.
constexpr std::int64_t kMaxOverheadChunks = std::int64_t{1} << 16;

[[nodiscard]] Result<void> check_overhead_chunks(const CalibrationOptions& o) {
  for (const auto* line : {&o.streaming, &o.in_cache})
    for (const Bytes size : line->overhead_sizes)
      if (const auto chunks = (size.value + o.overhead_chunk.value - 1) / o.overhead_chunk.value;
          chunks > kMaxOverheadChunks)
        return invalid(fmt::format(
            "overhead chunk: {} bytes cuts the overhead size of {} bytes into {} chunks, more than {}: take "
            "a chunk of at least {} bytes",
            o.overhead_chunk.value, size.value, chunks, kMaxOverheadChunks,
            (size.value + kMaxOverheadChunks - 1) / kMaxOverheadChunks));
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
  if (o.devices < 1 || o.devices > limits::kMaxRanks)
    return out_of_range(fmt::format("devices: must be in [1, {}], got {}", limits::kMaxRanks, o.devices));
  REFIT_TRY(check_line_sizes(o.streaming, "", false));
  REFIT_TRY(check_line_sizes(o.in_cache, "cache ", true));
  REFIT_TRY(check_transfer_sizes(o));
  if (!o.streaming.overhead_sizes.empty() || !o.in_cache.overhead_sizes.empty()) {
    REFIT_TRY_IN(check_chunk(o.overhead_chunk), "overhead chunk");
    REFIT_TRY(check_overhead_chunks(o));
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
      "quantize kernels and its NCCL executor's costs per operation and per step on the GPUs; links "
      "between GPUs are not measured"};
}

// What a line's chunk overhead fit leaves uncharged, if anything.
std::optional<std::string> chunk_overhead_note(std::string_view name, const LineSizes& line,
                                               const PairFit& fit) {
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

// What a line's overhead fits leave uncharged; `name` says which line.
std::vector<std::string> overhead_notes(std::string_view name, const LineSizes& line, const PairFit& fit) {
  std::vector<std::string> notes;
  if (auto note = chunk_overhead_note(name, line, fit)) notes.push_back(std::move(*note));
  if (line.transfer_sizes.empty())
    notes.push_back(fmt::format(
        "no {}transfer sizes: the sender's time per transfer was not measured, and the file charges none",
        name));
  else if (fit.transfer_overhead.value == 0)
    notes.push_back(fmt::format(
        "the {}sender's time per transfer came out negative or could not be told from the latency "
        "(noise) and is taken as 0",
        name));
  return notes;
}

// Every pair at once moves the largest streaming size; the host's bandwidth is their bytes over
// the time less one latency and each sender's own overheads, its chunks' and its transfer's.
[[nodiscard]] Result<void> measure_host(Bootstrap& bootstrap, Executor& executor, const CalibrationOptions& o,
                                        Calibration& c) {
  const std::int32_t pairs = bootstrap.size() / 2;
  c.all_pairs = REFIT_TRY(measure_pairs(bootstrap, executor, o, pairs, std::ranges::max(o.streaming.sizes)));
  const Seconds overhead = Seconds{static_cast<double>(c.all_pairs->chunks) * c.pair.chunk_overhead.value} +
                           c.pair.transfer_overhead;
  const Seconds moving = c.all_pairs->seconds - c.pair.latency - overhead;
  if (!(moving.value > 0))
    return fail(
        ErrorCode::kRuntime,
        fmt::format("every pair at once took {} s, no more than one message's latency ({} s) and "
                    "its overheads ({} chunks and a transfer: {} s): the measurements are noise",
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
  auto points = REFIT_TRY(measure_line(bootstrap, executor, o, o.in_cache, Turns::kOneAfterTheOther));
  // Every rank fits the same points, so every rank takes the same branch.
  auto fit = fit_pair(points);
  if (!fit) {
    c.notes.push_back(fmt::format(
        "the in-cache transfers gave no line ({}): the file predicts every refit at the streaming figures",
        fit.error().message));
    return {};
  }
  std::ranges::move(overhead_notes("in-cache ", o.in_cache, *fit), std::back_inserter(c.notes));
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
  // Rank 0's memory decides; every rank refuses with it rather than wait for it.
  const auto memory = bootstrap.rank() == 0 ? check_memcpy_memory(o.memcpy_bytes) : Result<void>{};
  REFIT_TRY(agree(bootstrap, memory ? Result<std::string>("") : std::unexpected(memory.error())));
  auto executor = REFIT_TRY_IN(make_executor(o.executor, bootstrap, o.executor_options), "--executor");
  Calibration c{.processes = bootstrap.size(), .cores = usable_cores(), .notes = gpu_notes()};
  c.one_pair = REFIT_TRY(measure_line(bootstrap, *executor, o, o.streaming, Turns::kTaken));
  c.pair = REFIT_TRY(fit_pair(c.one_pair));
  std::ranges::move(overhead_notes("", o.streaming, c.pair), std::back_inserter(c.notes));
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
