#pragma once
// Calibration: this host's links measured with refit's own executors, written as a cluster file
// the simulator takes, so that a prediction for this host rests on figures measured here and not
// on a preset's. Every process of the job (mpirun, or any Bootstrap) calls calibrate() alike.
//
// What is measured, each time as `refit run` times an iteration (the slowest rank's execute(),
// from a common barrier; the median of the repetitions, after one warm-up execution):
//   - one pair: rank 0 sends a transfer of each size to the first inference rank (in chunks as
//     refit plans them, some sizes again in many small chunks, and one again as many transfers;
//     a size's cuts take turns, execution by execution, so that a host that drifts while busy
//     changes them alike), the other ranks idle; t = latency + transfers * transfer overhead +
//     chunks * chunk overhead + bytes / bandwidth gives the sender's own time per chunk (its put,
//     flush and notice: what the same bytes took more per chunk more), its own time per transfer
//     (what the same bytes took more per transfer more, as plans of a transfer per tensor cut
//     them), then the per-message latency and the pair bandwidth (least squares of the relative
//     error over the sizes as refit cuts them); streaming, with shards larger than the caches,
//     and again in cache, with shards that stay in them between executions (a small refit's),
//     where copies run faster;
//   - every pair at once (with 4 or more processes): each training rank sends the largest size
//     to its inference rank; the bytes of all pairs over the time less the latency and its
//     overheads give the host's bandwidth, what all copies together reach on its cores and
//     memory;
//   - memcpy: rank 0 alone copies a buffer, as the executors pack and unpack staged chunks (and
//     one of the largest in-cache size, which stays in its caches);
//   - quantize: rank 0 alone quantizes a bf16 weight of the same size with refit's CPU quantizer,
//     as the UCX executor does for FP8 in flight, in each format; the file gets each rate.
// The cluster written models the host's oversubscription (more processes than cores): every
// process is a device of its own, reaching the others through one shared "NIC" of the host's
// bandwidth, and the fabric's oversubscription (host / pair bandwidth) caps each process at the
// pair bandwidth; its cache (CacheSpec) says what the links do for a refit whose shards fit in
// what the in-cache pair held. A refit is predicted on it with exactly that: no constant is taken from
// elsewhere and nothing is fitted to refit times.
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/executors/bootstrap.h"
#include "refit/executors/executor.h"
#include "refit/planner/strategy.h"
#include "refit/topology/cluster.h"

namespace refit {

namespace limits {
// The largest transfer one pair is calibrated with: 4 GiB.
inline constexpr Bytes kMaxCalibrationBytes{std::int64_t{1} << 32};
// The most transfers a transfer size is cut into (a plan of a tensor each).
inline constexpr std::int32_t kMaxCalibrationTransfers = 4096;
}  // namespace limits

// The transfers of one pair a line t = latency + transfers x transfer overhead + chunks x chunk
// overhead + bytes / bandwidth is fitted to.
struct LineSizes {
  std::vector<Bytes> sizes;  // each cut into chunks as refit plans them (PlanOptions::chunk, 8 MiB)
  // Moved again in chunks of CalibrationOptions::overhead_chunk (m2n-ring's 256 KiB): the same
  // bytes in more chunks tell the sender's time per chunk apart from the bandwidth. Empty: the
  // overhead is not measured, and none is charged.
  std::vector<Bytes> overhead_sizes;
  // Moved again as CalibrationOptions::transfers equal tensors, a transfer each (as the direct
  // strategy plans a pair's tensors; refit plans one transfer a pair): the same bytes in more
  // transfers tell the sender's time per transfer. Empty: not measured, and none is charged.
  std::vector<Bytes> transfer_sizes;
};

struct CalibrationOptions {
  std::string executor = "ucx";
  // Streaming, at least two distinct sizes: by default short messages, whose time is mostly
  // latency, and streams several times larger than a server CPU's last-level cache, as a large
  // refit's shards are; sizes in between run from the cache, faster than memory, and would bend
  // the line.
  LineSizes streaming{
      .sizes = {Bytes{256 << 10}, Bytes{1 << 20}, Bytes{64 << 20}, Bytes{128 << 20}, Bytes{256 << 20}},
      .overhead_sizes = {Bytes{64 << 20}, Bytes{128 << 20}},
      .transfer_sizes = {Bytes{64 << 20}}};
  // In cache (CacheSpec): shards small enough to stay in this core's caches between the
  // executions, as a small refit's do; the largest bounds the regime. Empty sizes: not measured,
  // and the file predicts every refit at the streaming figures.
  LineSizes in_cache{.sizes = {Bytes{256 << 10}, Bytes{1 << 20}, Bytes{4 << 20}, Bytes{8 << 20}},
                     .overhead_sizes = {Bytes{4 << 20}, Bytes{8 << 20}},
                     .transfer_sizes = {Bytes{4 << 20}}};
  Bytes overhead_chunk = kM2nRingChunk;  // the chunk of many small chunks a plan cuts
  // The tensors a transfer size is cut into, a transfer each: 64 MiB as 2 MiB tensors, the size of
  // a small model's weights, 4 MiB in cache as 128 KiB ones.
  std::int32_t transfers = 32;
  std::int32_t repetitions = 5;  // timed executions per measurement (the median is kept)
  Bytes memcpy_bytes{64 << 20};  // the buffer rank 0 copies, and the bf16 weight it quantizes
  std::int32_t devices = 8;      // processes the cluster file describes (the largest job it fits)
  ExecutorOptions executor_options;
  std::function<void(std::string_view)> progress;  // a line per measurement, on rank 0
};

// One measurement: `pairs` pairs each moving `bytes` in `transfers` transfers of `chunks` chunks
// in all, the median seconds.
struct PairMeasurement {
  Bytes bytes;  // per pair
  std::int32_t pairs = 1;
  Seconds seconds;
  std::int64_t chunks = 1;     // per pair
  std::int32_t transfers = 1;  // per pair
};

// t = latency + transfers * transfer_overhead + chunks * chunk_overhead + bytes / bandwidth, fitted
// to the one-pair measurements.
struct PairFit {
  Seconds latency;
  BytesPerSecond bandwidth;
  // 0 when the points cannot tell it apart (overhead_told false), or it came out negative or
  // left no positive bandwidth (noise, or small chunks that ran faster): the line is fitted alone.
  Seconds chunk_overhead{};
  // Whether some bytes were moved in two chunk counts, which tells the overhead from the bandwidth.
  bool overhead_told = false;
  // The same for the sender's time per transfer: 0 when not told (transfer_overhead_told false),
  // or where it came out negative or left a negative latency.
  Seconds transfer_overhead{};
  bool transfer_overhead_told = false;
  double worst_relative_residual = 0;  // the largest |fit - measured| / measured of the points
};

// The in-cache regime: one pair's transfers of the in-cache sizes, their line, and memcpy of a
// buffer of the largest.
struct CacheCalibration {
  std::vector<PairMeasurement> one_pair;
  PairFit pair;
  BytesPerSecond memcpy_bandwidth;
  Bytes capacity;  // the shards of the largest pair measured in cache: its source and destination
};

struct Calibration {
  std::int32_t processes = 0;  // of the calibrating job
  std::uint32_t cores = 0;     // this process's CPUs (sched affinity), for the record
  std::vector<PairMeasurement> one_pair;
  PairFit pair;
  std::optional<PairMeasurement> all_pairs;  // with 4 or more processes
  BytesPerSecond host_bandwidth;             // every pair at once; the pair bandwidth without it
  BytesPerSecond memcpy_bandwidth;
  // refit's CPU quantizer, bf16 bytes read per second, per FP8 format; the cluster's devices
  // quantize each format at its rate.
  QuantizeRates quantize_by_scheme{};
  std::optional<CacheCalibration> cache;  // none without in-cache sizes, or where noise gave no line
  std::vector<std::string> notes;         // what was not measured, and why
  ClusterSpec cluster;                    // what the cluster file holds
};

// The chunk overhead first: what the sizes measured in more chunks than their fewest took more,
// over the chunks more (pooled; 0 where negative). Then the transfer overhead: what the sizes
// measured in more transfers took more than in one, less their chunks more at that overhead,
// over the transfers more (pooled; 0 where negative). Then the line through each size in one
// transfer in its fewest chunks (as refit cuts it), less those overheads, by weighted least
// squares of the relative error (each point's weight 1 / t^2), so that the small transfers, where
// the latency shows, count as much as the large ones; the measurements that tell the overheads
// do not pull the line. Errors: fewer than two distinct sizes, a time that does not grow with the
// size, or a measurement of fewer than one transfer.
[[nodiscard]] Result<PairFit> fit_pair(const std::vector<PairMeasurement>& points);

// The host as the simulator models it (see the file's comment): `devices` processes, each its own
// domain, behind one NIC of `host` bandwidth with the pair's latency and chunk overhead; the
// fabric oversubscribed host / pair (at least 1); each device copies (packs, unpacks) at `memcpy`
// and quantizes each FP8 format at its rate of `quantize` (0: unmeasured). With `cache`, the host
// has a cache of its capacity: its link at the in-cache pair's figures (every pair at once taken
// to gain as one pair does, which is not measured) and its copies at the in-cache memcpy.
[[nodiscard]] Result<ClusterSpec> calibrated_cluster(std::int32_t devices, const PairFit& pair,
                                                     BytesPerSecond host, BytesPerSecond memcpy,
                                                     const QuantizeRates& quantize = {},
                                                     const std::optional<CacheCalibration>& cache = {});

// Measures on every rank of `bootstrap` (an even number of at least 2), returning the same
// Calibration on each. Errors name the option or the rank that failed.
[[nodiscard]] Result<Calibration> calibrate(Bootstrap& bootstrap, const CalibrationOptions& options);

}  // namespace refit
