#pragma once
// Device copies of shards (or framework parameters) that a caller holds in host memory (as
// `refit run` does): the executor
// runs on the copies, uploading the sources before each execution and downloading the
// destinations after it. Those copies are outside ExecutionReport::elapsed.
#include <span>
#include <vector>

#include "cuda_handles.h"
#include "refit/executors/nccl/local_ranks.h"

namespace refit::nccl_detail {

class HostMirror {
 public:
  // Allocates a device copy of every host shard on the current GPU; CUDA buffers pass unchanged.
  [[nodiscard]] static Result<HostMirror> make(std::span<const LocalRankBuffers> ranks);

  // The buffers the executor works on: all in CUDA memory.
  const std::vector<LocalRankBuffers>& device_ranks() const { return device_; }
  [[nodiscard]] Result<void> upload_sources() const;
  [[nodiscard]] Result<void> download_destinations() const;

 private:
  struct Pair {
    std::span<std::byte> host;
    std::byte* device = nullptr;
  };
  // Allocates a device copy of `bytes`, remembers the pair and points `bytes` at the copy.
  [[nodiscard]] Result<void> mirror(std::span<std::byte>& bytes, std::vector<Pair>& pairs, Rank rank);
  std::vector<DeviceMemory> memory_;
  std::vector<LocalRankBuffers> device_;
  std::vector<Pair> sources_;
  std::vector<Pair> destinations_;
};

}  // namespace refit::nccl_detail
