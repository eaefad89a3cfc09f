#pragma once
// Host memory for one rank's shards of a problem, as `refit run`, the tests and the benchmarks
// hand it to an executor: source shards filled with the verification pattern, destination shards
// zeroed, then checked element by element after the run.
#include <cstddef>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/executors/executor.h"

namespace refit {

using HostAllocator = std::function<Result<std::unique_ptr<HostAllocation>>(Bytes)>;

// One allocation from `allocator`, carved into buffers of `sizes` (each starting on a 64-byte
// line), which keep it alive: an executor then registers and publishes one region for all of a
// rank's buffers instead of one per buffer (10k UCX shared-memory segments took 3.8 s to prepare;
// 40k failed). Errors say `what` was being allocated.
[[nodiscard]] Result<std::vector<std::unique_ptr<HostAllocation>>> allocate_pooled(
    const HostAllocator& allocator, std::span<const Bytes> sizes, const std::string& what);

class HostShards {
 public:
  // Buffers for every non-empty box `rank` holds (sources) or must hold (destinations), each from
  // `allocator` (e.g. the executor's allocate_host, so that peers can write into them directly).
  [[nodiscard]] static Result<HostShards> allocate(const ReshardProblem& problem, Rank rank,
                                                   const HostAllocator& allocator);
  // The same on the heap, which cannot fail short of running out of memory.
  static HostShards allocate(const ReshardProblem& problem, Rank rank);

  const RankBuffers& buffers() const { return buffers_; }
  RankBuffers& buffers() { return buffers_; }
  // Checks every element of every destination shard against the pattern; the error names the
  // tensor and the first wrong element.
  [[nodiscard]] Result<void> verify(const ReshardProblem& problem) const;
  // Zeroes every destination shard again, so that a later execution is verified on its own. The
  // zeros go around the cache (streaming_zero): a destination another core has just written
  // stays dirty in that core's cache, and a sender's stores into it then wait for those lines,
  // which makes a transfer that fits in the caches markedly slower (figures in bench/RESULTS.md);
  // an engine's weights wait in memory instead.
  void clear_destinations();

 private:
  std::vector<std::unique_ptr<HostAllocation>> storage_;
  RankBuffers buffers_;
};

}  // namespace refit
