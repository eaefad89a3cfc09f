#pragma once
// Host memory for one rank's shards of a problem, as `refit run`, the tests and the benchmarks
// hand it to an executor: source shards filled with the verification pattern, destination shards
// zeroed, then checked element by element after the run.
#include <cstddef>
#include <memory>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/executors/executor.h"

namespace refit {

class HostShards {
 public:
  // Buffers for every non-empty box `rank` holds (sources) or must hold (destinations).
  static HostShards allocate(const ReshardProblem& problem, Rank rank);

  const RankBuffers& buffers() const { return buffers_; }
  RankBuffers& buffers() { return buffers_; }
  // Checks every element of every destination shard against the pattern; the error names the
  // tensor and the first wrong element.
  Result<void> verify(const ReshardProblem& problem) const;

 private:
  std::vector<std::unique_ptr<std::byte[]>> storage_;
  RankBuffers buffers_;
};

}  // namespace refit
