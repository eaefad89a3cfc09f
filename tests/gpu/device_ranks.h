#pragma once
// Every rank of a problem in one process on one GPU, for the GPU tests and the NCCL executor's
// benchmark: a bootstrap for a process alone (or one that pretends to have peers that never
// come), and device buffers for every rank's shards, sources filled with the verification
// pattern, destinations checked against it.
#include <string>
#include <vector>

#include "cuda_handles.h"
#include "refit/core/problem.h"
#include "refit/executors/bootstrap.h"
#include "refit/executors/nccl/local_ranks.h"

namespace refit::gpu_testing {

// Rank 0 of `size` ranks; the others never answer, so only size 1 can make a communicator.
class LoneBootstrap final : public Bootstrap {
 public:
  explicit LoneBootstrap(std::int32_t size = 1) : size_(size) {}
  std::int32_t rank() const override { return 0; }
  std::int32_t size() const override { return size_; }
  [[nodiscard]] Result<std::vector<std::string>> allgather(std::string_view mine) override {
    std::vector<std::string> all(static_cast<std::size_t>(size_));
    all[0] = std::string(mine);
    return all;
  }
  [[nodiscard]] Result<void> barrier() override { return {}; }

 private:
  std::int32_t size_;
};

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
