#pragma once
// Host memory the executor allocated with ucp_mem_map, remembered so that prepare() publishes the
// allocation's own registration instead of registering the caller's span again: only the key of
// memory UCX allocated itself (a shared-memory segment where it can) lets a same-host peer map the
// memory and copy into it, with no work on this rank and no kernel copy.
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "ucx_handles.h"

namespace refit::ucx_detail {

class AllocatedRegions {
 public:
  void add(const std::shared_ptr<MemoryRegion>& region, std::int64_t bytes);
  // The live allocation that holds all of [base, base + bytes), or nullptr.
  std::shared_ptr<MemoryRegion> find(const std::byte* base, std::int64_t bytes);

 private:
  struct Entry {
    const std::byte* base;
    std::int64_t bytes;
    std::weak_ptr<MemoryRegion> region;
  };
  std::vector<Entry> entries_;
};

}  // namespace refit::ucx_detail
