// What calibration makes of its measurements: the latency and bandwidth line, and the cluster
// the simulator predicts this host with (calibration.h says why it has this shape).
#include <algorithm>
#include <cmath>
#include <set>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/facade/calibration.h"

namespace refit {

Result<LineFit> fit_line(const std::vector<PairMeasurement>& points) {
  std::set<std::int64_t> sizes;
  for (const auto& p : points) sizes.insert(p.bytes.value);
  if (sizes.size() < 2)
    return invalid(fmt::format("a line needs transfers of at least two sizes, got {}", sizes.size()));
  // Minimise sum ((a + b x - t) / t)^2: weighted least squares with w = 1 / t^2.
  double sw = 0, sx = 0, st = 0, sxx = 0, sxt = 0;
  for (const auto& p : points) {
    const double x = static_cast<double>(p.bytes.value), t = p.seconds.value;
    if (!(t > 0)) return invalid(fmt::format("a transfer of {} bytes measured {} s", p.bytes.value, t));
    const double w = 1.0 / (t * t);
    sw += w, sx += w * x, st += w * t, sxx += w * x * x, sxt += w * x * t;
  }
  const double slope = (sw * sxt - sx * st) / (sw * sxx - sx * sx);
  const double intercept = (st - slope * sx) / sw;
  if (!(slope > 0))
    return fail(ErrorCode::kRuntime,
                "the time did not grow with the size: the measurements are noise (a host busy with "
                "other work, or sizes too small to tell apart)");
  LineFit fit{.latency = Seconds{std::max(0.0, intercept)},
              .bandwidth = BytesPerSecond{1.0 / slope},
              .worst_relative_residual = 0};
  for (const auto& p : points) {
    const double predicted = fit.latency.value + static_cast<double>(p.bytes.value) * slope;
    fit.worst_relative_residual =
        std::max(fit.worst_relative_residual, std::abs(predicted - p.seconds.value) / p.seconds.value);
  }
  return fit;
}

Result<ClusterSpec> calibrated_cluster(std::int32_t devices, const LineFit& pair, BytesPerSecond host,
                                       BytesPerSecond memcpy, BytesPerSecond quantize) {
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
              .pci_bus_id = ""};
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
  spec.nics.push_back(std::move(nic));
  REFIT_TRY(Cluster::make(spec));  // the file written must load
  return spec;
}

}  // namespace refit
