#include <memory>

#include <fmt/format.h>

#include "refit/core/checked.h"

#include "refit/core/try.h"
#include "refit/executors/host_memory.h"
#include "refit/executors/host_shards.h"

namespace refit {
namespace {

class HeapAllocation final : public HostAllocation {
 public:
  explicit HeapAllocation(Bytes bytes)
      : memory_(std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(bytes.value))),
        bytes_(memory_.get(), static_cast<std::size_t>(bytes.value)) {}
  std::span<std::byte> bytes() const override { return bytes_; }

 private:
  std::unique_ptr<std::byte[]> memory_;
  std::span<std::byte> bytes_;
};

// A buffer inside a pooled allocation, which it keeps alive.
class PooledAllocation final : public HostAllocation {
 public:
  PooledAllocation(std::shared_ptr<HostAllocation> pool, std::span<std::byte> bytes)
      : pool_(std::move(pool)), bytes_(bytes) {}
  std::span<std::byte> bytes() const override { return bytes_; }

 private:
  std::shared_ptr<HostAllocation> pool_;
  std::span<std::byte> bytes_;
};

// Buffers start on a cache line: stores into one never share a line with its neighbour's.
constexpr std::int64_t kPoolAlignment = 64;

}  // namespace

Result<std::vector<std::unique_ptr<HostAllocation>>> allocate_pooled(const HostAllocator& allocator,
                                                                     std::span<const Bytes> sizes,
                                                                     const std::string& what) {
  std::vector<std::int64_t> offsets;
  std::int64_t total = 0;
  for (const Bytes size : sizes) {
    offsets.push_back(total);
    const auto padded = REFIT_TRY_IN(
        checked_mul(ceil_div(size.value, kPoolAlignment), kPoolAlignment, limits::kMaxBytes, "bytes"), what);
    total = REFIT_TRY_IN(checked_add(total, padded, limits::kMaxBytes, "bytes"), what);
  }
  std::shared_ptr<HostAllocation> pool = REFIT_TRY_IN(allocator(Bytes{total}), what);
  std::vector<std::unique_ptr<HostAllocation>> out;
  const auto memory = pool->bytes();
  for (std::size_t i = 0; i < sizes.size(); ++i)
    out.push_back(std::make_unique<PooledAllocation>(
        pool,
        memory.subspan(static_cast<std::size_t>(offsets[i]), static_cast<std::size_t>(sizes[i].value))));
  return out;
}

std::unique_ptr<HostAllocation> heap_allocation(Bytes bytes) {
  return std::make_unique<HeapAllocation>(bytes);
}

Result<std::unique_ptr<HostAllocation>> Executor::allocate_host(Bytes bytes) {
  const Bytes physical = physical_memory();
  if (bytes.value < 0 || bytes > physical)
    return out_of_range(fmt::format("allocate_host: {} bytes, where this host has {} bytes of memory",
                                    bytes.value, physical.value));
  REFIT_TRY(check_host_memory(bytes, /*shared=*/false, read_host_memory_limits(), "allocate_host"));
  return allocate(bytes);
}

}  // namespace refit
