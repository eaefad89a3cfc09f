#include "device_delta_memory.h"

#include <fmt/format.h>

#include "device_copy.h"
#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

// The copy of `box` between its shard (row-major over `shard_box`) and its packed form (its
// elements back to back), as one numbered batch.
DeviceCopy box_copy(const Box& shard_box, const std::byte* from, std::byte* to, const Box& box,
                    std::int64_t element_bytes, bool packing) {
  const lowering::Array shard{.offset = 0, .box = &shard_box, .strides = nullptr};
  const lowering::Array packed{.offset = 0, .box = &box, .strides = nullptr};
  const auto planned = packing ? plan_copy(shard, packed, box, 0, box.volume(), element_bytes)
                               : plan_copy(packed, shard, box, 0, box.volume(), element_bytes);
  DeviceCopy copy = make_device_copy(planned.geometry, from + planned.src_offset, to + planned.dst_offset);
  number_items(std::span(&copy, 1));
  return copy;
}

}  // namespace

Result<void> DeviceDeltaMemory::check_shards(const RankBuffers& buffers, Rank rank) const {
  if (buffers.memory == MemoryKind::kHost || buffers.memory == kind()) return {};
  return unsupported(fmt::format(
      "rank {}: shards in device memory, but the delta codec's passes run on the host", rank.value));
}

Result<std::unique_ptr<DeltaBuffer>> DeviceDeltaMemory::allocate(Bytes bytes) {
  return kernels_->allocate(bytes.value);
}

Result<std::vector<std::unique_ptr<DeltaBuffer>>> DeviceDeltaMemory::allocate_payloads(
    std::span<const Bytes> sizes, const std::string& what) {
  std::vector<std::unique_ptr<DeltaBuffer>> out;
  for (const auto size : sizes) out.push_back(REFIT_TRY_IN(kernels_->allocate(size.value), what));
  return out;
}

// Host shards with device kernels: the box is packed on the host and uploaded whole.
Result<void> DeviceDeltaMemory::pack(MemoryKind shards, const ShardBuffer& shard, const Box& box, DType dtype,
                                     std::span<std::byte> packed) {
  const auto w = dtype_size(dtype);
  if (shards == kind())
    return kernels_->copy_box(box_copy(shard.box, shard.bytes.data(), packed.data(), box, w, true));
  staging_.resize(packed.size());
  const auto copy = box_copy(shard.box, shard.bytes.data(), staging_.data(), box, w, true);
  run_batch_on_host(std::span(&copy, 1));
  return kernels_->upload(packed.data(), staging_);
}

Result<void> DeviceDeltaMemory::unpack(MemoryKind shards, const ShardBuffer& shard, const Box& box,
                                       DType dtype, std::span<const std::byte> packed) {
  const auto w = dtype_size(dtype);
  if (shards == kind())
    return kernels_->copy_box(box_copy(shard.box, packed.data(), shard.bytes.data(), box, w, false));
  staging_.resize(packed.size());
  REFIT_TRY(kernels_->download(staging_, packed.data()));
  const auto copy = box_copy(shard.box, staging_.data(), shard.bytes.data(), box, w, false);
  run_batch_on_host(std::span(&copy, 1));
  return {};
}

Result<Checksum> DeviceDeltaMemory::checksum(std::span<const std::byte> bytes) {
  return codec_.checksum(bytes.data(), static_cast<std::int64_t>(bytes.size()));
}

Result<void> DeviceDeltaMemory::copy(std::span<std::byte> to, std::span<const std::byte> from) {
  return kernels_->copy(to.data(), from.data(), static_cast<std::int64_t>(from.size()));
}

Result<DeltaHeader> DeviceDeltaMemory::encode(const DeltaSource& source, std::span<std::byte> out) {
  return codec_.encode(DeviceDeltaSource{.baseline = source.baseline.data(),
                                         .current = source.current.data(),
                                         .bytes = static_cast<std::int64_t>(source.current.size()),
                                         .dtype = source.dtype,
                                         .base = source.base,
                                         .name = source.name},
                       out.data(), static_cast<std::int64_t>(out.size()));
}

Result<void> DeviceDeltaMemory::decode(std::span<const std::byte> payload, const DeltaTarget& target) {
  REFIT_TRY(codec_.decode(payload.data(), static_cast<std::int64_t>(payload.size()),
                          DeviceDeltaTarget{.bytes = target.bytes.data(),
                                            .size = static_cast<std::int64_t>(target.bytes.size()),
                                            .dtype = target.dtype,
                                            .base = target.base,
                                            .name = target.name}));
  return {};
}

}  // namespace refit::nccl_detail
