// What calibration makes of its measurements: latency, overhead per chunk and bandwidth fitted to
// them, and the cluster the simulator predicts this host with (calibration.h says why it has this
// shape).
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

// Whether some bytes were moved in two chunk counts: only then is the time per chunk told apart
// from the time per byte (one chunk size makes the chunks follow the bytes).
bool tells_overhead(const std::vector<PairMeasurement>& points) {
  std::map<std::int64_t, std::int64_t> chunks_of_bytes;
  for (const auto& p : points)
    if (const auto [at, fresh] = chunks_of_bytes.emplace(p.bytes.value, p.chunks);
        !fresh && at->second != p.chunks)
      return true;
  return false;
}

// The fit with the chunk overhead when the points tell it and it is not negative, else the line.
std::optional<PairFit> solve(const std::vector<PairMeasurement>& points) {
  std::vector<std::vector<double>> with, without;
  std::vector<double> t, w;
  for (const auto& p : points) {
    const double x = static_cast<double>(p.bytes.value), n = static_cast<double>(p.chunks);
    with.push_back({1.0, n, x});
    without.push_back({1.0, x});
    t.push_back(p.seconds.value);
    w.push_back(1.0 / (p.seconds.value * p.seconds.value));
  }
  const bool told = tells_overhead(points);
  if (const auto p = told ? least_squares(with, t, w) : std::nullopt; p && (*p)[1] >= 0 && (*p)[2] > 0)
    return PairFit{.latency = Seconds{(*p)[0]},
                   .bandwidth = BytesPerSecond{1.0 / (*p)[2]},
                   .chunk_overhead = Seconds{(*p)[1]},
                   .overhead_told = told};
  if (const auto p = least_squares(without, t, w))
    return PairFit{
        .latency = Seconds{(*p)[0]}, .bandwidth = BytesPerSecond{1.0 / (*p)[1]}, .overhead_told = told};
  return std::nullopt;
}

}  // namespace

Result<PairFit> fit_pair(const std::vector<PairMeasurement>& points) {
  std::set<std::int64_t> sizes;
  for (const auto& p : points) sizes.insert(p.bytes.value);
  if (sizes.size() < 2)
    return invalid(fmt::format("a line needs transfers of at least two sizes, got {}", sizes.size()));
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
    const double predicted = fit->latency.value + static_cast<double>(p.chunks) * fit->chunk_overhead.value +
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
              .chunk_overhead = pair.chunk_overhead};
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
         .copy_bandwidth = cache->memcpy_bandwidth});
  spec.nics.push_back(std::move(nic));
  REFIT_TRY(Cluster::make(spec));  // the file written must load
  return spec;
}

}  // namespace refit
