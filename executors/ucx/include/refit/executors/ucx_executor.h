#pragma once
// The UCX executor: moves a rank's part of a Plan between processes with libucp, in host memory
// (shared memory, CMA, TCP or RDMA: whatever UCX selects; UCX_TLS narrows it).
//
// prepare() registers every buffer once and exchanges worker addresses and remote keys through
// the Bootstrap; execute() moves data with one-sided puts, chunk by chunk in plan order, and uses
// small active messages only to say where a chunk may land and that it has landed. Waiting
// blocks on the worker's event file descriptor; every wait is bounded by ExecutorOptions::timeout.
#include <memory>

#include "refit/core/error.h"
#include "refit/executors/bootstrap.h"
#include "refit/executors/executor.h"

namespace refit {

// `bootstrap` must outlive the executor. Creates this process's UCX context and worker.
// Errors: kOutOfRange for a non-positive timeout or staging size; kRuntime when UCX fails.
[[nodiscard]] Result<std::unique_ptr<Executor>> make_ucx_executor(Bootstrap& bootstrap,
                                                                  const ExecutorOptions& options);

}  // namespace refit
