#pragma once
// A discovered cluster's GPUs at the speeds refit's kernels were just timed at on them
// (`--discover --measure`), instead of figures scaled from another GPU.
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/kernel_speeds.h"
#include "refit/topology/cluster.h"

namespace refit {

// Times refit's GPU kernels on the GPU with a PCI bus id (time_gpu_kernels; a test's own).
using KernelTimer = std::function<Result<KernelSpeeds>(std::string_view pci_bus_id)>;

// `spec` with every GPU at the copy and quantize rates and the NCCL executor's costs `timer`
// measured on its PCI bus id (once per bus id: a node's copies share it) and the assumptions
// those figures made dropped; a note per GPU timed appended to `notes`. Errors: a GPU without a
// bus id (nothing to time: no NVIDIA GPU was found), or the timer's, naming the GPU.
[[nodiscard]] Result<ClusterSpec> with_timed_kernels(ClusterSpec spec, const KernelTimer& timer,
                                                     std::vector<std::string>& notes);

}  // namespace refit
