#pragma once
// The NCCL executor's kernels (box copy, FP8 quantize) and its own costs timed on one GPU
// (kernel_speeds.h).
#include <string_view>

#include "refit/core/error.h"
#include "refit/executors/kernel_speeds.h"

namespace refit {

// Times the kernels on the CUDA device with PCI bus id `pci_bus_id` (as NVML gives it, e.g.
// 0000:18:00.0), holding at most 9 x copy_bytes (the copy's matrix and shard), 1.5 x
// quantize_bytes or 2 x nccl_bytes (and the executor's staging) of device memory at a time while
// it runs. Errors name the device and the CUDA call; kOutOfRange for timing options out of range.
[[nodiscard]] Result<KernelSpeeds> time_nccl_kernels(std::string_view pci_bus_id, const KernelTiming& timing);

}  // namespace refit
