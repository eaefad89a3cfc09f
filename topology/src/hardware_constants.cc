#include "hardware_constants.h"

#include <array>

#include <fmt/format.h>

namespace refit::hw {
namespace {

// NCCL's per-link NVLink constants (src/graph/topo.h, quoted in docs/hardware.md for sm90 and sm100).
constexpr double kSm80LinkGbps = 20.0;
constexpr double kSm90LinkGbps = 20.6;
constexpr double kSm100LinkGbps = 40.1;

constexpr Bytes gigabytes(std::int64_t gb) { return Bytes{gb * 1'000'000'000}; }
constexpr BytesPerSecond tbps(double tb) { return BytesPerSecond::from_gbps(tb * 1000.0); }

// `f` with the kernels measured on it, or none (nullptr), and the rates that follow: the
// measured ones, else the reference run's copy scaled by HBM line rate and no quantize rate (the
// simulator derives one from the copy, docs/hardware.md "refit's own kernels").
GpuFigures with_kernels(GpuFigures f, const MeasuredKernels* kernels) {
  f.kernels = kernels;
  f.copy = kernels ? kernels->copy : copy_scaled_to(reference_kernels(), f.hbm_line);
  f.quantize = kernels ? kernels->quantize : QuantizeRates{};
  f.nccl = kernels ? std::optional(kernels->nccl) : std::nullopt;
  return f;
}

GpuFigures gpu(std::string_view name, BytesPerSecond nvlink, double link_gbps, BytesPerSecond hbm_line,
               Bytes memory, const MeasuredKernels* kernels) {
  return with_kernels({.name = name,
                       .nvlink = nvlink,
                       .nvlink_gbps_per_link = link_gbps,
                       .hbm_line = hbm_line,
                       .memory = memory},
                      kernels);
}

// Indexed by GpuModel.
std::array<GpuFigures, 6> make_figures() {
  const auto nvlink = BytesPerSecond::from_gbps;
  const MeasuredKernels* h100 = measured_kernels_on(kH100Sxm5);
  return {{
      // A100 (SXM, not in docs/hardware.md): 12 NVLink3 links at NCCL's 20.0; HBM2e 2.04 TB/s (datasheet).
      gpu("A100", nvlink(12 * kSm80LinkGbps), kSm80LinkGbps, tbps(2.04), gigabytes(80), nullptr),
      // H100 (SXM5): 370-376 GB/s effective NVLink (docs/hardware.md); HBM3 3.35 TB/s (docs/hardware.md),
      // as the reference run records it.
      gpu("H100", nvlink(370.0), kSm90LinkGbps, h100->hbm_line, gigabytes(80), h100),
      // H200: the NVLink4 of the H100 (docs/hardware.md); HBM3e 4.8 TB/s (docs/hardware.md).
      gpu("H200", nvlink(370.0), kSm90LinkGbps, tbps(4.8), gigabytes(141), nullptr),
      // B200, GB200, GB300: NVLink5 ~746 GB/s effective (docs/hardware.md); HBM3e 8 TB/s per GPU (NVIDIA
      // datasheets, not in docs/hardware.md).
      gpu("B200", nvlink(746.0), kSm100LinkGbps, tbps(8.0), gigabytes(180), nullptr),
      gpu("GB200", nvlink(746.0), kSm100LinkGbps, tbps(8.0), gigabytes(186), nullptr),
      gpu("GB300", nvlink(746.0), kSm100LinkGbps, tbps(8.0), gigabytes(288), nullptr),
  }};
}

}  // namespace

GpuFigures figures_of_part(GpuModel model, std::string_view part) {
  const GpuFigures& f = gpu_figures(model);
  if (f.kernels == nullptr || f.kernels->gpu == part) return f;
  return with_kernels(f, nullptr);
}

std::string copy_assumption(const GpuFigures& figures, std::string_view gpu) {
  if (figures.kernels != nullptr) return {};
  const MeasuredKernels& base = reference_kernels();
  return fmt::format(
      "pack/unpack on the {} is charged at {:.0f} GB/s: refit's copy kernel has no run on that GPU "
      "(tests/gpu/run.sh), so the {:.0f} GB/s it copied on the {} ({}) is scaled by HBM line rate "
      "({:.0f} of {:.0f} GB/s)",
      gpu.empty() ? figures.name : gpu, figures.copy.gbps(), base.copy.gbps(), base.gpu, base.date,
      figures.hbm_line.gbps(), base.hbm_line.gbps());
}

QuantizeRates host_quantize_rates() {
  QuantizeRates rates{};
  of_scheme(rates, QuantScheme::kFp8Block128) = BytesPerSecond::from_gbps(1.13);
  of_scheme(rates, QuantScheme::kMxfp8) = BytesPerSecond::from_gbps(1.12);
  return rates;
}

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
