#pragma once
// Issues a Program through a Backend. The host only enqueues work; it stays at most `window`
// steps ahead of the GPU, so no CUDA call ever blocks on a full launch queue, and every wait is
// bounded: when the GPU makes no progress for `timeout`, or the process is interrupted, the
// backend aborts (the communicator) and the error names the step with its peers, transfers and
// chunks.
#include <chrono>
#include <cstdint>
#include <functional>

#include "program.h"
#include "refit/core/error.h"
#include "refit/core/units.h"

namespace refit::nccl_detail {

using Clock = std::chrono::steady_clock;

class Backend {
 public:
  virtual ~Backend() = default;
  // Enqueues one op without waiting for the GPU. It may wait, until `deadline` at most, for NCCL
  // to accept a group.
  [[nodiscard]] virtual Result<void> issue(const Op& op, Clock::time_point deadline) = 0;
  // True once the work recorded before `event` has run; an error when CUDA or NCCL report one.
  [[nodiscard]] virtual Result<bool> reached(std::int32_t event) = 0;
  // Makes all enqueued work finish or fail (aborts or revokes the communicator). After a timeout
  // or error.
  virtual void abort() = 0;
};

struct RunOptions {
  Seconds timeout{60.0};    // the longest the GPU may make no progress
  std::int32_t window = 4;  // steps the host may run ahead of the GPU
  // Told of every chunk this process sent, once the host has seen its step finish on the GPU.
  std::function<void(std::int32_t transfer, std::int64_t chunk)> on_chunk_sent;
  // Asked while the host waits on the GPU (ExecutorOptions::interrupted): true aborts the
  // communicator; peers then fail when NCCL sees the connections to this process close, or at
  // worst at their own timeout.
  std::function<bool()> interrupted;
};

// Returns the time from the first op issued to the last one finished. Errors keep the code the
// backend gave them (kTimeout when the GPU made no progress), prefixed with the step.
[[nodiscard]] Result<Seconds> run_program(const Program& program, Backend& backend,
                                          const RunOptions& options);

}  // namespace refit::nccl_detail
