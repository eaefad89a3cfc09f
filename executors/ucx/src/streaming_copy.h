#pragma once
// Copies into a peer's memory that UCX maps into this process (same-host shared memory).
// A regular copy reads every destination line into the cache before writing it, so copying
// cold memory moves three bytes over the memory bus for each byte copied; non-temporal stores
// write around the cache and move two. On the 2-core machine of bench/run_ucx_bench.sh that
// made refit's 2 GiB puts 1.4x faster than ucp_put_nbx, whose shared-memory transport
// copies with memcpy.
#include <cstddef>

namespace refit::ucx_detail {

// Copies `bytes` from `from` to `to`, the bulk with non-temporal stores. Other processes may see
// the bytes only after store_fence().
void streaming_copy(std::byte* to, const std::byte* from, std::size_t bytes);
// Orders every streaming_copy before this thread's later stores (the notice that the data is
// there).
void store_fence();

}  // namespace refit::ucx_detail
