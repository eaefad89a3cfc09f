// The UCX executor's record of memory it allocated: prepare() looks a caller's buffer up there to
// publish the allocation's own registration (the one a same-host peer can map) rather than
// registering the buffer again. A buffer must lie wholly inside a live allocation to be found.
#include <gtest/gtest.h>

#include "allocated_regions.h"

namespace refit::ucx_detail {
namespace {

TEST(AllocatedRegions, FindsBuffersInsideLiveAllocationsOnly) {
  auto worker = Worker::create();
  ASSERT_TRUE(worker) << worker.error().message;
  auto a = MemoryRegion::allocate((*worker)->context(), 4096);
  auto b = MemoryRegion::allocate((*worker)->context(), 8192);
  ASSERT_TRUE(a && b);
  auto first = std::make_shared<MemoryRegion>(std::move(*a));
  auto second = std::make_shared<MemoryRegion>(std::move(*b));
  AllocatedRegions regions;
  regions.add(first, 4096);
  regions.add(second, 8192);
  EXPECT_EQ(regions.find(first->base(), 4096), first);           // all of it
  EXPECT_EQ(regions.find(second->base() + 100, 1000), second);   // a shard carved from it
  EXPECT_EQ(regions.find(second->base() + 8000, 192), second);   // ending at its end
  EXPECT_EQ(regions.find(second->base() + 8000, 193), nullptr);  // running past it
  std::byte heap[64];
  EXPECT_EQ(regions.find(heap, 64), nullptr);  // memory the executor did not allocate
  const std::byte* gone = first->base();
  first.reset();  // the allocation was freed: its memory is no longer the executor's
  EXPECT_EQ(regions.find(gone, 16), nullptr);
}

}  // namespace
}  // namespace refit::ucx_detail
