#pragma once
// refit's own GPU kernels as tests/gpu/run.sh measured them (bench/RESULTS.md, docs/hardware.md
// "refit's own kernels"): the presets of a GPU they ran on charge packing, unpacking and FP8
// quantization at these rates, and a GPU without a run of its own is charged at a measured GPU's
// rates scaled by HBM line rate, which its predictions then say.
#include <span>
#include <string_view>

#include "refit/core/units.h"
#include "refit/topology/cluster.h"

namespace refit {

// The H100 SXM5 80GB (PCI 10de:2330) as it names itself (NVML, nvidia-smi): the GPU of the
// reference run, which the dgx-h100 preset models.
inline constexpr std::string_view kH100Sxm5 = "NVIDIA H100 80GB HBM3";

struct MeasuredKernels {
  std::string_view gpu;   // the GPU, as it names itself (NVML, nvidia-smi)
  std::string_view date;  // of the run, UTC
  // The box copy packing and unpacking 16-byte-aligned boxes (a TP8 column shard of 2 KiB rows,
  // 1 GiB): bytes copied per second.
  BytesPerSecond copy;
  // Per FP8 format, the bf16 bytes per second the quantize kernel reads (2 GiB of bf16).
  QuantizeRates quantize;
  // The GPU's HBM line rate (docs/hardware.md), by which its figures scale to another GPU.
  BytesPerSecond hbm_line;
  // refit's NCCL executor on a communicator of this one GPU (nccl_plan_bench's fit over chunk
  // sizes and stagings): a chunk there is a send and a receive of the one process, so each costs
  // half a chunk's time. These are host and launch times, not memory's: a GPU without a run of
  // its own is charged them unscaled.
  NcclCosts nccl;
};

// Every GPU refit's kernels have run on since they were last rewritten.
std::span<const MeasuredKernels> measured_kernels();
// The run on the GPU that names itself `gpu`, or nullptr.
const MeasuredKernels* measured_kernels_on(std::string_view gpu);
// The run other GPUs' figures are scaled from (the H100 SXM5's).
const MeasuredKernels& reference_kernels();

// What refit's NCCL executor is charged on `gpu`: its own costs where measured, else the
// reference run's.
NcclCosts charged_nccl_costs(const GpuSpec& gpu);

// `m`'s copy rate scaled to a GPU of HBM line rate `hbm_line`, rounded to whole GB/s.
BytesPerSecond copy_scaled_to(const MeasuredKernels& m, BytesPerSecond hbm_line);

// The FP8 quantize rate of format `scheme` on a GPU without a measurement of it, from that GPU's
// copy rate: as many bf16 bytes per byte copied as refit's kernels managed in the reference run
// (its quantize rate over its copy rate).
BytesPerSecond quantize_from_copy(BytesPerSecond copy, QuantScheme scheme);

}  // namespace refit
