#include "cuda_status.h"

#include <thread>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

constexpr auto kPoll = std::chrono::microseconds(20);

std::string_view nccl_result_name(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "ncclSuccess";
    case ncclUnhandledCudaError:
      return "ncclUnhandledCudaError";
    case ncclSystemError:
      return "ncclSystemError";
    case ncclInternalError:
      return "ncclInternalError";
    case ncclInvalidArgument:
      return "ncclInvalidArgument";
    case ncclInvalidUsage:
      return "ncclInvalidUsage";
    case ncclRemoteError:
      return "ncclRemoteError";
    case ncclInProgress:
      return "ncclInProgress";
    default:
      return "ncclResult";
  }
}

// Polls the communicator's asynchronous state until it leaves ncclInProgress or `deadline`.
[[nodiscard]] Result<ncclResult_t> async_state(ncclComm_t comm, std::string_view call,
                                               Clock::time_point deadline) {
  while (true) {
    ncclResult_t state = ncclSuccess;
    REFIT_TRY(nccl_ok(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError", comm));
    if (state != ncclInProgress) return state;
    if (Clock::now() > deadline)
      return fail(ErrorCode::kTimeout, fmt::format("{}: still in progress at the deadline", call));
    std::this_thread::sleep_for(kPoll);
  }
}

}  // namespace

Result<void> cuda_ok(cudaError_t status, std::string_view call) {
  if (status == cudaSuccess) return {};
  // The runtime keeps a failed call's error for the thread until cudaGetLastError() reads it:
  // left there, the next kernel launch checked with cudaGetLastError() would report it as its own.
  (void)cudaGetLastError();
  return fail(ErrorCode::kRuntime,
              fmt::format("{}: {} ({})", call, cudaGetErrorString(status), cudaGetErrorName(status)));
}

Result<void> upload(void* device, const void* host, std::size_t bytes, std::string_view what) {
  REFIT_TRY(cuda_ok(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), what));
  return cuda_ok(cudaStreamSynchronize(nullptr), what);
}

std::unexpected<Error> nccl_error(ncclResult_t status, std::string_view call, ncclComm_t comm) {
  const char* last = ncclGetLastError(comm);
  return fail(status == ncclRemoteError ? ErrorCode::kPeerFailed : ErrorCode::kRuntime,
              fmt::format("{}: {} ({}){}{}", call, ncclGetErrorString(status), nccl_result_name(status),
                          last && *last ? ": " : "", last ? last : ""));
}

Result<void> nccl_ok(ncclResult_t status, std::string_view call, ncclComm_t comm) {
  if (status == ncclSuccess) return {};
  return nccl_error(status, call, comm);
}

Result<void> nccl_settle(ncclComm_t comm, ncclResult_t status, std::string_view call,
                         Clock::time_point deadline) {
  if (status != ncclInProgress) return nccl_ok(status, call, comm);
  const auto state = REFIT_TRY(async_state(comm, call, deadline));
  return nccl_ok(state, call, comm);
}

Result<void> wait_stream(cudaStream_t stream, ncclComm_t comm, std::string_view what,
                         Clock::time_point deadline) {
  while (true) {
    const cudaError_t done = cudaStreamQuery(stream);
    if (done == cudaSuccess) return {};
    if (done != cudaErrorNotReady) return cuda_ok(done, what);
    ncclResult_t state = ncclSuccess;
    REFIT_TRY(nccl_ok(ncclCommGetAsyncError(comm, &state), "ncclCommGetAsyncError", comm));
    if (state != ncclSuccess && state != ncclInProgress) return nccl_error(state, what, comm);
    if (Clock::now() > deadline)
      return fail(ErrorCode::kTimeout, fmt::format("{}: not finished at the deadline", what));
    std::this_thread::sleep_for(kPoll);
  }
}

DeviceGuard::DeviceGuard(int device) {
  status_ = cuda_ok(cudaGetDevice(&previous_), "cudaGetDevice");
  if (status_) status_ = cuda_ok(cudaSetDevice(device), fmt::format("cudaSetDevice({})", device));
}

DeviceGuard::~DeviceGuard() {
  if (previous_ >= 0) cudaSetDevice(previous_);
}

}  // namespace refit::nccl_detail
