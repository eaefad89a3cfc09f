// host_delta_memory(): a delta refit's bytes in host memory, encoded by DeltaCodec
// (delta_memory.h).
#include <cstring>

#include <fmt/format.h>

#include "box_rows.h"
#include "refit/core/try.h"
#include "refit/executors/delta_memory.h"

namespace refit {
namespace {

class HostBuffer final : public DeltaBuffer {
 public:
  explicit HostBuffer(std::unique_ptr<HostAllocation> memory) : memory_(std::move(memory)) {}
  std::span<std::byte> bytes() const override { return memory_->bytes(); }

 private:
  std::unique_ptr<HostAllocation> memory_;
};

class HostDeltaMemory final : public DeltaMemory {
 public:
  HostDeltaMemory(HostAllocator payloads, DeltaEncodeOptions options)
      : payloads_(std::move(payloads)), codec_(options) {}

  MemoryKind kind() const override { return MemoryKind::kHost; }

  Result<void> check_shards(const RankBuffers& buffers, Rank rank) const override {
    if (buffers.memory == MemoryKind::kHost) return {};
    return unsupported(fmt::format(
        "rank {}: a delta refit of device memory runs the GPU codec: the NCCL executor's delta step",
        rank.value));
  }

  std::int64_t capacity(std::int64_t bytes, DType dtype) const override {
    return codec_.options().format ? delta_payload_capacity(bytes, dtype_size(dtype))
                                   : kDeltaHeaderBytes + bytes;
  }

  Result<std::unique_ptr<DeltaBuffer>> allocate(Bytes bytes) override {
    return host_delta_buffer(heap_allocation(bytes));
  }

  Result<std::vector<std::unique_ptr<DeltaBuffer>>> allocate_payloads(std::span<const Bytes> sizes,
                                                                      const std::string& what) override {
    std::vector<std::unique_ptr<DeltaBuffer>> out;
    for (auto& memory : REFIT_TRY(allocate_pooled(payloads_, sizes, what)))
      out.push_back(host_delta_buffer(std::move(memory)));
    return out;
  }

  Result<void> pack(MemoryKind, const ShardBuffer& shard, const Box& box, DType dtype,
                    std::span<std::byte> packed) override {
    box_rows::pack_box(shard.box, shard.bytes, box, dtype_size(dtype), packed);
    return {};
  }

  Result<void> unpack(MemoryKind, const ShardBuffer& shard, const Box& box, DType dtype,
                      std::span<const std::byte> packed) override {
    box_rows::unpack_box(shard.box, shard.bytes, box, dtype_size(dtype), packed);
    return {};
  }

  Result<Checksum> checksum(std::span<const std::byte> bytes) override { return checksum_of(bytes); }

  Result<void> copy(std::span<std::byte> to, std::span<const std::byte> from) override {
    if (!from.empty()) std::memcpy(to.data(), from.data(), from.size());
    return {};
  }

  Result<DeltaHeader> encode(const DeltaSource& source, std::span<std::byte> out) override {
    return codec_.encode(source, out);
  }

  Result<void> decode(std::span<const std::byte> payload, const DeltaTarget& target) override {
    REFIT_TRY(codec_.decode(payload, target));
    return {};
  }

 private:
  HostAllocator payloads_;
  DeltaCodec codec_;
};

}  // namespace

std::unique_ptr<DeltaBuffer> host_delta_buffer(std::unique_ptr<HostAllocation> memory) {
  return std::make_unique<HostBuffer>(std::move(memory));
}

std::unique_ptr<DeltaMemory> host_delta_memory(HostAllocator payloads, DeltaEncodeOptions options) {
  return std::make_unique<HostDeltaMemory>(std::move(payloads), options);
}

}  // namespace refit
