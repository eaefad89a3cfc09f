#include "allocated_regions.h"

#include <algorithm>

namespace refit::ucx_detail {

void AllocatedRegions::add(const std::shared_ptr<MemoryRegion>& region, std::int64_t bytes) {
  std::erase_if(entries_, [](const Entry& e) { return e.region.expired(); });
  entries_.push_back(Entry{.base = region->base(), .bytes = bytes, .region = region});
}

std::shared_ptr<MemoryRegion> AllocatedRegions::find(const std::byte* base, std::int64_t bytes) {
  for (const Entry& e : entries_)
    if (base >= e.base && base + bytes <= e.base + e.bytes)
      if (auto region = e.region.lock()) return region;
  return nullptr;
}

}  // namespace refit::ucx_detail
