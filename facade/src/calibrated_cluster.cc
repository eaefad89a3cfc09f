// What calibration makes of its measurements: latency, overheads per chunk and per transfer and
// bandwidth fitted to them, and the cluster the simulator predicts this host with (calibration.h
// says why it has this shape).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <vector>

#include <fmt/format.h>

#include "refit/core/least_squares.h"
#include "refit/core/try.h"
#include "refit/facade/calibration.h"

namespace refit {

namespace {

// Of each size moved in one transfer, the measurements in its fewest chunks: the size as refit's
// plans cut it.
std::vector<PairMeasurement> in_fewest_chunks(const std::vector<PairMeasurement>& points) {
  std::map<std::int64_t, std::int64_t> fewest;
  for (const auto& p : points)
    if (p.transfers == 1)
      if (const auto [at, fresh] = fewest.emplace(p.bytes.value, p.chunks); !fresh)
        at->second = std::min(at->second, p.chunks);
  std::vector<PairMeasurement> out;
  for (const auto& p : points)
    if (p.transfers == 1 && p.chunks == fewest[p.bytes.value]) out.push_back(p);
  return out;
}

// Each size as refit cuts it: its chunks, and its time, the mean of its measurements.
struct AsRefitCuts {
  std::int64_t chunks = 0;
  double seconds = 0;
  std::int32_t count = 0;
};

std::map<std::int64_t, AsRefitCuts> as_refit_cuts(const std::vector<PairMeasurement>& points) {
  std::map<std::int64_t, AsRefitCuts> out;
  for (const auto& p : in_fewest_chunks(points)) {
    auto& f = out[p.bytes.value];
    f.chunks = p.chunks;
    f.seconds += (p.seconds.value - f.seconds) / ++f.count;
  }
  return out;
}

// What the measurements `extra` picks took more than their sizes as refit cuts them, over what
// `extra` counts more of them (chunks, transfers), all pooled: each extra one counts once. None
// where no measurement of a size refit's cuts measured has more.
template <class Extra>
std::optional<Seconds> time_per_extra(const std::vector<PairMeasurement>& points, Extra extra) {
  const auto cuts = as_refit_cuts(points);
  double extra_seconds = 0, extra_count = 0;
  for (const auto& p : points) {
    const auto f = cuts.find(p.bytes.value);
    if (f == cuts.end()) continue;
    if (const auto [count, seconds] = extra(p, f->second); count > 0) {
      extra_seconds += p.seconds.value - f->second.seconds - seconds;
      extra_count += count;
    }
  }
  return extra_count > 0 ? std::optional<Seconds>{Seconds{extra_seconds / extra_count}} : std::nullopt;
}

// The time per chunk: the one-transfer measurements in more chunks than their size's fewest.
std::optional<Seconds> time_per_extra_chunk(const std::vector<PairMeasurement>& points) {
  return time_per_extra(points, [](const PairMeasurement& p, const AsRefitCuts& f) {
    const bool more = p.transfers == 1 && p.chunks > f.chunks;
    return std::pair{more ? static_cast<double>(p.chunks - f.chunks) : 0.0, 0.0};
  });
}

// The time per transfer: the measurements in more transfers than one, less their chunks more at
// `per_chunk`.
std::optional<Seconds> time_per_extra_transfer(const std::vector<PairMeasurement>& points,
                                               Seconds per_chunk) {
  return time_per_extra(points, [per_chunk](const PairMeasurement& p, const AsRefitCuts& f) {
    if (p.transfers <= 1) return std::pair{0.0, 0.0};
    return std::pair{static_cast<double>(p.transfers - 1),
                     static_cast<double>(p.chunks - f.chunks) * per_chunk.value};
  });
}

// latency + bytes / bandwidth fitted to each size as refit cuts it, less `per_chunk` per chunk and
// `per_transfer` for its one transfer: weighted least squares of the relative error (each point's
// weight 1 / t^2).
std::optional<PairFit> line_through(const std::vector<PairMeasurement>& points, Seconds per_chunk,
                                    Seconds per_transfer) {
  std::vector<std::vector<double>> rows;
  std::vector<double> t, w;
  for (const auto& p : in_fewest_chunks(points)) {
    rows.push_back({1.0, static_cast<double>(p.bytes.value)});
    t.push_back(p.seconds.value - static_cast<double>(p.chunks) * per_chunk.value - per_transfer.value);
    w.push_back(1.0 / (p.seconds.value * p.seconds.value));
  }
  const auto fit = least_squares(rows, t, w);
  if (!fit || !((*fit)[1] > 0)) return std::nullopt;
  return PairFit{.latency = Seconds{(*fit)[0]},
                 .bandwidth = BytesPerSecond{1.0 / (*fit)[1]},
                 .chunk_overhead = per_chunk,
                 .transfer_overhead = per_transfer};
}

// Given the time per chunk, the time per transfer, then the line: an overhead that comes out
// negative (the same bytes ran faster cut finer, which no cost per piece does), or that leaves no
// positive bandwidth or a negative latency (more than the transfers' own time), is taken as 0.
std::optional<PairFit> solve_given(const std::vector<PairMeasurement>& points, Seconds per_chunk) {
  const auto per_transfer = time_per_extra_transfer(points, per_chunk);
  auto fit =
      per_transfer && per_transfer->value > 0 ? line_through(points, per_chunk, *per_transfer) : std::nullopt;
  if (!fit || fit->latency.value < 0) fit = line_through(points, per_chunk, Seconds{0});
  if (fit) fit->transfer_overhead_told = per_transfer.has_value();
  return fit;
}

// The overheads from the sizes measured in two chunk counts and in many transfers, then the line
// through the sizes as refit cuts them: the refits a calibration predicts go in refit's chunks, and
// the measurements there only to tell the overheads do not pull the line.
std::optional<PairFit> solve(const std::vector<PairMeasurement>& points) {
  const auto per_chunk = time_per_extra_chunk(points);
  auto fit = per_chunk && per_chunk->value > 0 ? solve_given(points, *per_chunk) : std::nullopt;
  if (!fit || fit->latency.value < 0) fit = solve_given(points, Seconds{0});
  if (fit) fit->overhead_told = per_chunk.has_value();
  return fit;
}

}  // namespace

Result<PairFit> fit_pair(const std::vector<PairMeasurement>& points) {
  std::set<std::int64_t> sizes;
  for (const auto& p : points) {
    if (p.transfers < 1)
      return invalid(fmt::format("a measurement of {} bytes in {} transfers: at least one is needed",
                                 p.bytes.value, p.transfers));
    if (p.transfers == 1) sizes.insert(p.bytes.value);
  }
  if (sizes.size() < 2)
    return invalid(fmt::format("a line needs transfers of at least two sizes in one transfer each, got {}",
                               sizes.size()));
  for (const auto& p : points)
    if (!(p.seconds.value > 0))
      return invalid(fmt::format("a transfer of {} bytes measured {} s", p.bytes.value, p.seconds.value));
  auto fit = solve(points);
  if (!fit || !(fit->bandwidth.value > 0) || !std::isfinite(fit->bandwidth.value))
    return fail(ErrorCode::kRuntime,
                "the time did not grow with the size: the measurements are noise (a host busy with "
                "other work, or sizes too small to tell apart)");
  fit->latency = Seconds{std::max(0.0, fit->latency.value)};
  for (const auto& p : points) {
    const double predicted = fit->latency.value + p.transfers * fit->transfer_overhead.value +
                             static_cast<double>(p.chunks) * fit->chunk_overhead.value +
                             static_cast<double>(p.bytes.value) / fit->bandwidth.value;
    fit->worst_relative_residual =
        std::max(fit->worst_relative_residual, std::abs(predicted - p.seconds.value) / p.seconds.value);
  }
  return *fit;
}

Result<ClusterSpec> calibrated_cluster(std::int32_t devices, const PairFit& pair, BytesPerSecond host,
                                       BytesPerSecond memcpy, const QuantizeRates& quantize,
                                       const std::optional<CacheCalibration>& cache) {
  if (devices < 1) return invalid(fmt::format("devices: must be >= 1, got {}", devices));
  ClusterSpec spec;
  spec.name = "calibrated-host";
  spec.nvlink_latency = pair.latency;  // no NVLink: every device is a domain of its own
  // Each process's own copies (its uplink) at the pair bandwidth, all of them together at the host's.
  spec.fabric.oversubscription =
      std::clamp(host.value / pair.bandwidth.value, 1.0, cluster_limits::kMaxOversubscription);
  NicSpec nic{.id = 0,
              .name = "shared memory",
              .node = 0,
              .bandwidth = std::max(host, pair.bandwidth),
              .latency = pair.latency,
              .gpus = {},
              .pci_bus_id = "",
              .chunk_overhead = pair.chunk_overhead,
              .transfer_overhead = pair.transfer_overhead};
  for (std::int32_t g = 0; g < devices; ++g) {
    spec.gpus.push_back({.id = GpuId{g},
                         .node = 0,
                         .domain = g,
                         .nvlink_bandwidth = BytesPerSecond{0},
                         .copy_bandwidth = memcpy,
                         .memory = Bytes{0},
                         .pci_bus_id = "",
                         .quantize_bandwidth = quantize});
    spec.domains.push_back({.id = g, .gpus = {GpuId{g}}});
    nic.gpus.emplace_back(g);
  }
  if (cache)
    spec.caches.push_back(
        {.node = 0,
         .capacity = cache->capacity,
         .nic_bandwidth = cache->pair.bandwidth * (nic.bandwidth.value / pair.bandwidth.value),
         .nic_latency = cache->pair.latency,
         .chunk_overhead = cache->pair.chunk_overhead,
         .transfer_overhead = cache->pair.transfer_overhead,
         .copy_bandwidth = cache->memcpy_bandwidth});
  spec.nics.push_back(std::move(nic));
  // The file written must load. What it refuses was measured, not written by the user: a runtime
  // failure that says so, not bad input naming a field of a file nobody wrote.
  if (auto made = Cluster::make(spec); !made)
    return fail(ErrorCode::kRuntime,
                fmt::format("the measured figures make no usable cluster ({}): the measurements are noise "
                            "(a host busy with other work, or sizes too small to tell apart; larger --sizes "
                            "or more --repetitions)",
                            made.error().message));
  return spec;
}

}  // namespace refit
