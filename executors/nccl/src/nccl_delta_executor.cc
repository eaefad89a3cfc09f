#include "refit/executors/nccl/nccl_delta_executor.h"

#include <fmt/format.h>

#include "cuda_delta_kernels.h"
#include "device_delta_memory.h"
#include "refit/core/try.h"

namespace refit {

Result<std::unique_ptr<DeltaExecutor>> make_nccl_delta_executor(Bootstrap& bootstrap,
                                                                const ExecutorOptions& options,
                                                                NcclSetup setup,
                                                                std::optional<DeltaRebalance> rebalance) {
  auto nccl = REFIT_TRY(NcclExecutor::create(bootstrap, options, std::move(setup)));
  auto kernels = REFIT_TRY_IN(nccl_detail::CudaDeltaKernels::on_device(nccl->device()),
                              fmt::format("nccl delta executor, rank {}", bootstrap.rank()));
  return std::make_unique<DeltaExecutor>(std::move(nccl), bootstrap,
                                         std::make_unique<nccl_detail::DeviceDeltaMemory>(std::move(kernels)),
                                         std::move(rebalance));
}

}  // namespace refit
