#pragma once
// Stores that write around the cache (non-temporal stores), for memory another process reads.
// A regular store first reads the destination line into this core's cache, so copying into cold
// memory moves three bytes over the memory bus for each byte copied; non-temporal stores move two.
// Used for the UCX executor's puts into a peer's memory mapped into this process (UCX's own
// shared-memory put copies with memcpy; the gain is measured by bench/run_ucx_bench.sh
// --no-direct-stores, figures in bench/RESULTS.md), and for clearing destinations between timed
// executions, which must not leave them dirty in the clearing core's cache (host_shards.h).
#include <cstddef>

namespace refit {

// Copies `bytes` from `from` to `to`, the bulk with non-temporal stores. Other processes may see
// the bytes only after store_fence().
void streaming_copy(std::byte* to, const std::byte* from, std::size_t bytes);
// Zeroes `bytes` at `to`, every whole line with non-temporal stores: on x86-64 those lines end
// in memory, in no core's cache (elsewhere this is memset). Other processes may see the zeros
// only after store_fence().
void streaming_zero(std::byte* to, std::size_t bytes);
// Orders every streaming store of this thread before its later stores (the notice that the data
// is there).
void store_fence();

}  // namespace refit
