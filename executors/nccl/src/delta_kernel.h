#pragma once
// The GPU delta codec's passes on a stream (delta_kernel_body.h has what each lane does): one
// launch each, a thread per lane and a block per tile, the tiles' results reduced in the block.
// Every pointer of `d` is device memory; each returns cudaGetLastError() after its launch.
#include <cuda_runtime_api.h>

#include "delta_kernel_body.h"

namespace refit::nccl_detail {

// Encoding, pass 1: mask words, and per tile the changed elements and the checksum's change.
cudaError_t launch_delta_scan(const DeltaLanes& d, cudaStream_t stream);
// Encoding, pass 2: the bitmask body, after the prefix made the tile counts offsets.
cudaError_t launch_delta_write(const DeltaLanes& d, cudaStream_t stream);
// Per tile the sum of checksum terms of d.current.
cudaError_t launch_delta_checksum(const DeltaLanes& d, cudaStream_t stream);
// Decoding, pass 1: per tile the payload mask's set bits, and its lanes with bits past the end.
cudaError_t launch_delta_count(const DeltaLanes& d, cudaStream_t stream);
// Decoding, pass 2: per tile the checksum's change once applied (after the prefix of pass 1).
cudaError_t launch_delta_check(const DeltaLanes& d, cudaStream_t stream);
// Decoding, pass 3: the changes XORed into d.target.
cudaError_t launch_delta_apply(const DeltaLanes& d, cudaStream_t stream);
// Encoding runs: the lanes' carries (one block), then per tile the lanes' position bytes.
cudaError_t launch_delta_positions(const DeltaLanes& d, cudaStream_t stream);
// Encoding runs: the runs body, after the prefix made the tiles' position bytes offsets.
cudaError_t launch_delta_write_runs(const DeltaLanes& d, cudaStream_t stream);
// Decoding runs: the mask (d.mask, zeroed here) the positions make, and the totals (one block).
cudaError_t launch_delta_runs_to_mask(const DeltaLanes& d, cudaStream_t stream);
// Into d.totals the sum of `counts` and of `sums` (either may be null) over the tiles; `counts`,
// when given, becomes exclusive offsets.
cudaError_t launch_delta_tile_prefix(const DeltaLanes& d, std::uint64_t* counts, const std::uint64_t* sums,
                                     cudaStream_t stream);

}  // namespace refit::nccl_detail
