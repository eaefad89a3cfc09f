#include <memory>

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

}  // namespace refit
