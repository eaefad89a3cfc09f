#include "hardware_constants.h"

#include <array>
#include <cmath>

namespace refit::hw {
namespace {

// docs/hardware.md measures an H100 device-to-device copy at 1.3-1.6 TB/s of copied bytes against an HBM3
// line rate of 3.35 TB/s (a copy reads and writes). We take the middle, 1.45 TB/s, and scale
// other GPUs by their HBM line rate with the same fraction, rounded to whole GB/s.
BytesPerSecond copy_for_hbm_tbps(double hbm_line_tbps) {
  return BytesPerSecond::from_gbps(std::round(hbm_line_tbps * 1450.0 / 3.35));
}

// NCCL's per-link NVLink constants (src/graph/topo.h, quoted in docs/hardware.md for sm90 and sm100).
constexpr double kSm80LinkGbps = 20.0;
constexpr double kSm90LinkGbps = 20.6;
constexpr double kSm100LinkGbps = 40.1;

constexpr Bytes gigabytes(std::int64_t gb) { return Bytes{gb * 1'000'000'000}; }

// Indexed by GpuModel.
std::array<GpuFigures, 6> make_figures() {
  const auto nvlink = BytesPerSecond::from_gbps;
  return {{
      // kA100 (SXM, not in docs/hardware.md): 12 NVLink3 links at NCCL's 20.0; HBM2e 2.04 TB/s (datasheet).
      {nvlink(12 * kSm80LinkGbps), kSm80LinkGbps, copy_for_hbm_tbps(2.04), gigabytes(80)},
      // kH100 (SXM): 370-376 GB/s effective NVLink (docs/hardware.md); HBM3 3.35 TB/s (docs/hardware.md).
      {nvlink(370.0), kSm90LinkGbps, copy_for_hbm_tbps(3.35), gigabytes(80)},
      // kH200: the NVLink4 of the H100 (docs/hardware.md); HBM3e 4.8 TB/s (docs/hardware.md).
      {nvlink(370.0), kSm90LinkGbps, copy_for_hbm_tbps(4.8), gigabytes(141)},
      // kB200, kGb200, kGb300: NVLink5 ~746 GB/s effective (docs/hardware.md); HBM3e 8 TB/s per GPU (NVIDIA
      // datasheets, not in docs/hardware.md).
      {nvlink(746.0), kSm100LinkGbps, copy_for_hbm_tbps(8.0), gigabytes(180)},
      {nvlink(746.0), kSm100LinkGbps, copy_for_hbm_tbps(8.0), gigabytes(186)},
      {nvlink(746.0), kSm100LinkGbps, copy_for_hbm_tbps(8.0), gigabytes(288)},
  }};
}

}  // namespace

BytesPerSecond effective_nic_bandwidth(double line_gigabits_per_second) {
  return BytesPerSecond::from_gbps(line_gigabits_per_second * kNicEffectiveGbpsPer400G / 400.0);
}

const GpuFigures& gpu_figures(GpuModel model) {
  static const std::array<GpuFigures, 6> figures = make_figures();
  return figures[static_cast<std::size_t>(model)];
}

BytesPerSecond nvlink_for_links(const GpuFigures& figures, std::int32_t links) {
  return BytesPerSecond::from_gbps(std::round(figures.nvlink_gbps_per_link * links * 10.0) / 10.0);
}

GpuModel gpu_model_for(std::int32_t sm, std::string_view device_name) {
  if (sm >= 103) return GpuModel::kGb300;  // sm 103: Blackwell Ultra
  if (sm >= 100)
    return device_name.find("GB200") != std::string_view::npos ? GpuModel::kGb200 : GpuModel::kB200;
  if (sm >= 90) return device_name.find("H200") != std::string_view::npos ? GpuModel::kH200 : GpuModel::kH100;
  return GpuModel::kA100;  // older GPUs: the closest figures we have
}

}  // namespace refit::hw
