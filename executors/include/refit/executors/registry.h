#pragma once
// The executors this build has, by name (e.g. "ucx"). Which backends a build knows is decided by
// CMake (compile definitions of refit::executor_registry), not by self-registering statics.
#include <cstdint>
#include <memory>
#include <optional>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/bootstrap.h"
#include "refit/executors/delta_executor.h"
#include "refit/executors/executor.h"
#include "refit/executors/kernel_speeds.h"

namespace refit {

// Where an executor puts this process's plan ranks. The default, which every executor takes, is
// one plan rank per process on the GPU of its rank among its host's ranks. Only an executor that
// runs on GPUs (nccl) takes more: a device, or several plan ranks in this one process.
struct DevicePlacement {
  std::optional<int> device;  // the CUDA device; none: the rank's among its host's ranks
  // comm_rank_of[plan rank]: the communicator rank that runs it; none: plan rank r is bootstrap
  // rank r
  std::optional<std::vector<std::int32_t>> comm_rank_of;

  bool is_default() const { return !device && !comm_rank_of; }
};

// Names of the executors built into this binary, in a stable order.
std::vector<std::string_view> executor_names();

// Whether make_executor knows `name`, with its errors (kNotFound, kUnsupported), so that a
// command can refuse a misspelt executor before it starts anything.
[[nodiscard]] Result<void> check_executor_name(std::string_view name);

// An executor bound to `bootstrap`, which must outlive it, placed as `placement` says. Errors name
// the executors this build has: kNotFound for an unknown name, kUnsupported for a backend this
// build lacks; kInvalidArgument for a placement the executor does not take; the backend's own error
// for options it refuses.
[[nodiscard]] Result<std::unique_ptr<Executor>> make_executor(std::string_view name, Bootstrap& bootstrap,
                                                              const ExecutorOptions& options,
                                                              const DevicePlacement& placement = {});

// A delta refit (delta_executor.h) over the executor `name`, its bytes where that executor moves
// them: host memory and the CPU codec for ucx, the GPU and the GPU codec for nccl
// (nccl/nccl_delta_executor.h). A delta refit runs one plan rank per process, so `placement` may
// name a device only. Errors as make_executor's.
[[nodiscard]] Result<std::unique_ptr<DeltaExecutor>> make_delta_executor(
    std::string_view name, Bootstrap& bootstrap, const ExecutorOptions& options,
    std::optional<DeltaRebalance> rebalance = std::nullopt, const DevicePlacement& placement = {});

// refit's GPU kernels timed on this machine's GPU with PCI bus id `pci_bus_id`, by the backend
// that runs them (nccl). kUnsupported when this build has none.
[[nodiscard]] Result<KernelSpeeds> time_gpu_kernels(std::string_view pci_bus_id, const KernelTiming& timing);

}  // namespace refit
