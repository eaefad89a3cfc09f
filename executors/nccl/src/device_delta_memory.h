#pragma once
// A delta refit's bytes where the GPU codec's passes work (delta_memory.h): device memory with
// CudaDeltaKernels (the NCCL executor's delta step), or host memory with HostDeltaKernels, the same
// bodies on a CPU (what the CPU tests run in a whole delta refit). DeviceDeltaCodec encodes and
// decodes, so payloads are raw (no zstd); pieces are packed and unpacked with the NCCL executor's
// box copy, on shards in the passes' memory, or staged through the host for host shards.
#include <memory>

#include "delta_kernels.h"
#include "device_delta_codec.h"
#include "refit/executors/delta_memory.h"

namespace refit::nccl_detail {

class DeviceDeltaMemory final : public DeltaMemory {
 public:
  explicit DeviceDeltaMemory(std::unique_ptr<DeltaKernels> kernels)
      : kernels_(std::move(kernels)), codec_(*kernels_) {}

  MemoryKind kind() const override { return kernels_->memory(); }
  [[nodiscard]] Result<void> check_shards(const RankBuffers& buffers, Rank rank) const override;
  std::int64_t capacity(std::int64_t bytes, DType) const override { return kDeltaHeaderBytes + bytes; }
  [[nodiscard]] Result<std::unique_ptr<DeltaBuffer>> allocate(Bytes bytes) override;
  [[nodiscard]] Result<std::vector<std::unique_ptr<DeltaBuffer>>> allocate_payloads(
      std::span<const Bytes> sizes, const std::string& what) override;
  [[nodiscard]] Result<void> pack(MemoryKind shards, const ShardBuffer& shard, const Box& box, DType dtype,
                                  std::span<std::byte> packed) override;
  [[nodiscard]] Result<void> unpack(MemoryKind shards, const ShardBuffer& shard, const Box& box, DType dtype,
                                    std::span<const std::byte> packed) override;
  [[nodiscard]] Result<Checksum> checksum(std::span<const std::byte> bytes) override;
  [[nodiscard]] Result<void> copy(std::span<std::byte> to, std::span<const std::byte> from) override;
  [[nodiscard]] Result<DeltaHeader> encode(const DeltaSource& source, std::span<std::byte> out) override;
  [[nodiscard]] Result<void> decode(std::span<const std::byte> payload, const DeltaTarget& target) override;

 private:
  std::unique_ptr<DeltaKernels> kernels_;
  DeviceDeltaCodec codec_;
  std::vector<std::byte> staging_;  // a host shard's piece on its way to or from the passes' memory
};

}  // namespace refit::nccl_detail
