#pragma once
// Where a delta refit's bytes live and which codec runs on them (delta_executor.h). The step's
// rounds, agreements, audits, all-or-nothing decoding and repairs are written once, in
// DeltaExecutor; a DeltaMemory keeps each piece's bytes (a sender's baseline and this step's
// bytes, a receiver's packed copy, the payloads the executor behind moves), packs them out of the
// shards and back, checksums them and runs the codec on them:
//  - host_delta_memory(): host memory and DeltaCodec, for any executor of host memory (UCX);
//  - the NCCL executor's (nccl/nccl_delta_executor.h): device memory and the GPU codec.
// Pointers it hands out may be device memory: the executor never reads them itself.
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "refit/core/error.h"
#include "refit/delta/codec.h"
#include "refit/executors/executor.h"
#include "refit/executors/host_shards.h"

namespace refit {

// Memory a DeltaMemory hands out (of its kind); its bytes stay valid while it lives.
class DeltaBuffer {
 public:
  virtual ~DeltaBuffer() = default;
  virtual std::span<std::byte> bytes() const = 0;
};

class DeltaMemory {
 public:
  virtual ~DeltaMemory() = default;
  // Where the buffers it hands out lie: the executor behind moves the payloads as this kind.
  virtual MemoryKind kind() const = 0;
  // Refuses (kUnsupported, naming the rank) shards it cannot pack from or unpack into.
  [[nodiscard]] virtual Result<void> check_shards(const RankBuffers& buffers, Rank rank) const = 0;
  // The most the payload of a chunk of `bytes` of `dtype` takes.
  virtual std::int64_t capacity(std::int64_t bytes, DType dtype) const = 0;
  // A piece's packed bytes (a sender's baseline or this step's, a receiver's copy), uninitialised.
  [[nodiscard]] virtual Result<std::unique_ptr<DeltaBuffer>> allocate(Bytes bytes) = 0;
  // The payloads of the transfers a rank sends or receives, one buffer per size; errors say `what`.
  [[nodiscard]] virtual Result<std::vector<std::unique_ptr<DeltaBuffer>>> allocate_payloads(
      std::span<const Bytes> sizes, const std::string& what) = 0;
  // Copies `box` of `shard` (a shard of a rank whose buffers are `shards` memory), its elements
  // back to back, into `packed`; unpack() copies it back.
  [[nodiscard]] virtual Result<void> pack(MemoryKind shards, const ShardBuffer& shard, const Box& box,
                                          DType dtype, std::span<std::byte> packed) = 0;
  [[nodiscard]] virtual Result<void> unpack(MemoryKind shards, const ShardBuffer& shard, const Box& box,
                                            DType dtype, std::span<const std::byte> packed) = 0;
  // delta/checksum.h's checksum_of of bytes it handed out.
  [[nodiscard]] virtual Result<Checksum> checksum(std::span<const std::byte> bytes) = 0;
  [[nodiscard]] virtual Result<void> copy(std::span<std::byte> to, std::span<const std::byte> from) = 0;
  // DeltaCodec::encode and decode's contracts (the payload into `out`, at most capacity() bytes;
  // decoding all or nothing), on bytes it handed out.
  [[nodiscard]] virtual Result<DeltaHeader> encode(const DeltaSource& source, std::span<std::byte> out) = 0;
  [[nodiscard]] virtual Result<void> decode(std::span<const std::byte> payload,
                                            const DeltaTarget& target) = 0;
};

// Host memory as a DeltaBuffer.
std::unique_ptr<DeltaBuffer> host_delta_buffer(std::unique_ptr<HostAllocation> memory);

// Host memory and DeltaCodec(options): packed copies from the heap, payloads from `payloads` (the
// executor behind's allocate_host, the memory its transport moves fastest). Takes host shards.
std::unique_ptr<DeltaMemory> host_delta_memory(HostAllocator payloads, DeltaEncodeOptions options = {});

}  // namespace refit
