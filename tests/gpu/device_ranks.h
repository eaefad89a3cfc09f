#pragma once
// Every rank of a problem in one process on one GPU (refit/executors/lone_bootstrap.h), for the
// GPU tests and the NCCL executor's benchmark: device buffers for every rank's shards, sources
// filled with the verification pattern, destinations checked against it.
#include <string>
#include <vector>

#include "cuda_handles.h"
#include "refit/core/problem.h"
#include "refit/executors/lone_bootstrap.h"
#include "refit/executors/nccl/local_ranks.h"

namespace refit::gpu_testing {

// Device memory for every shard of every rank: sources hold the pattern, destinations zeros.
// The host side of filling and checking runs one thread per rank.
struct DeviceRanks {
  std::vector<nccl_detail::DeviceMemory> memory;
  std::vector<LocalRankBuffers> ranks;  // by plan rank
};
DeviceRanks make_device_ranks(const ReshardProblem& problem);
void clear_destinations(const DeviceRanks& ranks);
// Copies every destination back and checks it element by element against the pattern; with
// `filled` (by plan rank), only those ranks', and the others' must still be all zeros.
[[nodiscard]] Result<void> verify_device_destinations(const ReshardProblem& problem, const DeviceRanks& ranks,
                                                      const std::vector<bool>& filled = {});

}  // namespace refit::gpu_testing
