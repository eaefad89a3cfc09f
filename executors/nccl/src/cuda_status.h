#pragma once
// CUDA and NCCL results as refit Errors that name the call, and the bounded waits on a
// non-blocking communicator (a call may return ncclInProgress and finish in the background).
#include <cstddef>
#include <string_view>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include "refit/core/error.h"
#include "run_program.h"

namespace refit::nccl_detail {

// "cudaMalloc: out of memory (cudaErrorMemoryAllocation)". Clears the thread's last error, so
// that a later launch does not report this one.
[[nodiscard]] Result<void> cuda_ok(cudaError_t status, std::string_view call);
// Copies `bytes` of host memory to the device and waits until they are there: a copy from
// pageable memory may return before its DMA is done, and the executor's streams, non-blocking,
// do not wait for the default stream that does it.
[[nodiscard]] Result<void> upload(void* device, const void* host, std::size_t bytes, std::string_view what);
// A failed NCCL call as an error, like fail(): "ncclSend(...): unhandled cuda error
// (ncclUnhandledCudaError): <NCCL's last message>". kPeerFailed for ncclRemoteError (a remote
// process failed or exited), kRuntime otherwise.
std::unexpected<Error> nccl_error(ncclResult_t status, std::string_view call, ncclComm_t comm = nullptr);
// Nothing for ncclSuccess, nccl_error otherwise.
[[nodiscard]] Result<void> nccl_ok(ncclResult_t status, std::string_view call, ncclComm_t comm = nullptr);

// Waits until `comm` has finished a call that returned `status` (ncclInProgress when it goes on
// in the background), polling its asynchronous error until `deadline`: kTimeout after that.
[[nodiscard]] Result<void> nccl_settle(ncclComm_t comm, ncclResult_t status, std::string_view call,
                                       Clock::time_point deadline);

// Waits until everything enqueued on `stream` has run, or NCCL reports an error, or `deadline`.
[[nodiscard]] Result<void> wait_stream(cudaStream_t stream, ncclComm_t comm, std::string_view what,
                                       Clock::time_point deadline);

// Makes `device` current for its lifetime and restores the caller's device after.
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  // The error of switching, if any: callers check it before touching the device.
  [[nodiscard]] Result<void> status() const { return status_; }

 private:
  int previous_ = -1;
  Result<void> status_;
};

}  // namespace refit::nccl_detail
