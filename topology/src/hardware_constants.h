#pragma once
// Every hardware figure the topology module uses, in one place, each with its source.
// They are effective (what transfers achieve), not line rates, so that the planner and the
// simulator can divide bytes by them directly. Sources: docs/hardware.md,
// which gives the public source of each figure, unless a comment says otherwise.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "refit/core/units.h"
#include "refit/topology/measured_kernels.h"

namespace refit::hw {

// NICs: a 400 Gb/s NDR NIC moves 46-48 GB/s per direction of its 50 GB/s line rate (docs/hardware.md,
// nccl-tests reports): we take 47 GB/s per 400 Gb/s of line rate (efficiency 0.94). 800 Gb/s
// XDR is assumed to keep the same efficiency (docs/hardware.md), giving 94 GB/s; 200 Gb/s gives 23.5.
inline constexpr double kNicEffectiveGbpsPer400G = 47.0;
// Line rate in Gb/s (as NCCL's speed/1000 and sysfs "rate" give it) -> effective bytes/s.
BytesPerSecond effective_nic_bandwidth(double line_gigabits_per_second);

// Microseconds -> Seconds, the one conversion used for constants, overrides and files, so that
// a value written in microseconds reads back bit-identical.
constexpr Seconds micros(double us) { return Seconds{us / 1e6}; }

// Per-message latency (alpha). docs/hardware.md: 10-20 us per inter-node point-to-point message (NCCL's
// network step constant is ~14 us), 5-10 us intra-node (NCCL's NVLink step ~3.4 us).
inline constexpr Seconds kNetworkLatency = micros(15);
inline constexpr Seconds kNvlinkLatency = micros(5);

// GPU generations the presets and importers know.
enum class GpuModel { kA100, kH100, kH200, kB200, kGb200, kGb300 };

struct GpuFigures {
  std::string_view name;  // the model's name, as notes say it ("H100")
  // Effective NVLink per GPU per direction through the NVSwitch, used by the presets.
  BytesPerSecond nvlink;
  // NCCL's per-link constant in GB/s, used when links are counted (NCCL XML, NVML).
  double nvlink_gbps_per_link = 0;
  // The HBM line rate (docs/hardware.md, "GPU memory").
  BytesPerSecond hbm_line;
  // Bytes copied per second by refit's box copy (pack/unpack): measured on this GPU (kernels), else
  // scaled from a measured GPU by HBM line rate.
  BytesPerSecond copy;
  // bf16 bytes per second refit's quantize kernels read, per FP8 format: measured on this GPU, else
  // 0 (the simulator derives them from the copy rate and says so).
  QuantizeRates quantize{};
  // Device memory, the datasheet's capacity in decimal GB (docs/hardware.md, "GPU memory").
  Bytes memory;
  // refit's NCCL executor's costs measured on this GPU, else nullopt (the simulator charges the
  // reference run's and says so).
  std::optional<NcclCosts> nccl;
  // refit's kernels measured on this GPU (measured_kernels.h), or nullptr.
  const MeasuredKernels* kernels = nullptr;
};

const GpuFigures& gpu_figures(GpuModel model);
// The figures of a GPU of `model` that names itself `part` (empty: unknown): the model's, unless
// they were measured on another part of it (an H100 PCIe or NVL is not the SXM5 the H100's
// kernels ran on), which then takes the scaled figures of a GPU without a run.
GpuFigures figures_of_part(GpuModel model, std::string_view part);
// What a prediction on `gpu` (its name; empty: the model's) of `figures` assumes for its copies,
// when refit's copy kernel has no run on it; empty when it has one.
std::string copy_assumption(const GpuFigures& figures, std::string_view gpu = {});
// The PCI device id of the H200 SXM (pci.ids: "GH100 [H200 SXM 141GB]"): NCCL XML gives the
// device id but no name, and sm 90 alone does not tell an H200 from an H100.
inline constexpr std::string_view kH200PciDeviceId = "0x2335";
// The PCI device id of the H100 SXM5 80GB (pci.ids: "GH100 [H100 SXM5 80GB]"), the part refit's
// kernels were measured on (kH100Sxm5): other H100s share its sm 90.
inline constexpr std::string_view kH100Sxm5PciDeviceId = "0x2330";
// NVLink bandwidth of a GPU with `links` active links, rounded to 0.1 GB/s (18 x 20.6 = 370.8).
BytesPerSecond nvlink_for_links(const GpuFigures& figures, std::int32_t links);
// The model for a compute capability (sm 90 = Hopper) and, when known, the NVML device name
// (it alone tells an H200 from an H100).
GpuModel gpu_model_for(std::int32_t sm, std::string_view device_name);

// cpu-host: processes on one machine standing in for GPUs. Not in docs/hardware.md: rough figures for a
// current x86 server, where one process's large memcpy runs at ~10 GB/s and a shared-memory
// message costs ~1 us; the loopback "NIC" (TCP over lo) is taken as fast but slower to start.
inline constexpr double kHostCopyGbps = 10.0;
inline constexpr Seconds kHostSharedMemoryLatency = micros(1);
inline constexpr double kHostLoopbackGbps = 10.0;
inline constexpr Seconds kHostLoopbackLatency = micros(10);
// FP8 quantization on a host: refit's CPU quantizer, which the UCX executor runs on the thread that
// makes the puts (one core a process), in bf16 bytes read per second. Measured, not rough: the
// median of 20 `refit calibrate` runs on a 2-core Intel Xeon VM, 2026-12-06 (bench/RESULTS.md,
// "cpu-host's quantize rate"). Derived from the host's copy rate at the ratios of refit's GPU
// kernels (quantize_from_copy), it would be 17.6 and 14.1 GB/s: 13-16 times too fast.
QuantizeRates host_quantize_rates();

}  // namespace refit::hw
