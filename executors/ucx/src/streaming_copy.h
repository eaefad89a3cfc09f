#pragma once
// Copies into a peer's memory that UCX maps into this process (same-host shared memory).
// A regular copy reads every destination line into the cache before writing it, so copying
// cold memory moves three bytes over the memory bus for each byte copied; non-temporal stores
// write around the cache and move two. UCX's shared-memory put copies with memcpy; the gain is
// measured by bench/run_ucx_bench.sh (--no-direct-stores), figures in bench/RESULTS.md.
#include <cstddef>

namespace refit::ucx_detail {

// Copies `bytes` from `from` to `to`, the bulk with non-temporal stores. Other processes may see
// the bytes only after store_fence().
void streaming_copy(std::byte* to, const std::byte* from, std::size_t bytes);
// Orders every streaming_copy before this thread's later stores (the notice that the data is
// there).
void store_fence();

}  // namespace refit::ucx_detail
