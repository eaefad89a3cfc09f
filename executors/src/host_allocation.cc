#include <unistd.h>

#include <memory>

#include <fmt/format.h>

#include "refit/core/checked.h"

#include "refit/executors/executor.h"

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

}  // namespace

std::unique_ptr<HostAllocation> heap_allocation(Bytes bytes) {
  return std::make_unique<HeapAllocation>(bytes);
}

Result<std::unique_ptr<HostAllocation>> Executor::allocate_host(Bytes bytes) {
  const auto pages = sysconf(_SC_PHYS_PAGES);
  const auto page = sysconf(_SC_PAGE_SIZE);
  const std::int64_t physical = pages > 0 && page > 0 ? std::int64_t{pages} * page : limits::kMaxBytes;
  if (bytes.value < 0 || bytes.value > physical)
    return out_of_range(fmt::format("allocate_host: {} bytes, where this host has {} bytes of memory",
                                    bytes.value, physical));
  return allocate(bytes);
}

}  // namespace refit
