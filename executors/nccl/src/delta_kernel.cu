#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "delta_kernel.h"
#include "grid_limits.h"

namespace refit::nccl_detail {
namespace {

constexpr int kPrefixThreads = 1024;
// The runs' walks are 48 bytes: a block of 256 keeps their scan's shared memory small.
constexpr int kWalkThreads = 256;

using Reduce = cub::BlockReduce<std::uint64_t, kDeltaTileLanes>;
using Scan = cub::BlockScan<std::uint64_t, kDeltaTileLanes>;

// This thread's lane of tile `tile`, or -1 past the chunk's last lane.
__device__ std::int64_t lane_of(const DeltaLanes& d, std::int64_t tile) {
  const std::int64_t lane = tile * kDeltaTileLanes + threadIdx.x;
  return lane < d.lanes ? lane : -1;
}

// Sums `count` and `sum` over the block into the tile's entries.
__device__ void store_tile(const DeltaLanes& d, std::int64_t tile, std::uint64_t count, std::uint64_t sum,
                           Reduce::TempStorage& storage) {
  const std::uint64_t tile_count = Reduce(storage).Sum(count);
  __syncthreads();
  const std::uint64_t tile_sum = Reduce(storage).Sum(sum);
  __syncthreads();
  if (threadIdx.x == 0) {
    d.tile_count[tile] = tile_count;
    d.tile_sum[tile] = tile_sum;
  }
}

template <int W>
__global__ void __launch_bounds__(kDeltaTileLanes) scan_kernel(const DeltaLanes d) {
  __shared__ Reduce::TempStorage storage;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    DeltaLaneScan s;
    if (lane >= 0) {
      s = delta_scan_lane<W>(d, lane);
      d.mask[lane] = s.mask;
    }
    store_tile(d, tile, delta_popcount(s.mask), s.sum, storage);
  }
}

template <int W>
__global__ void __launch_bounds__(kDeltaTileLanes) checksum_kernel(const DeltaLanes d) {
  __shared__ Reduce::TempStorage storage;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    store_tile(d, tile, 0, lane >= 0 ? delta_checksum_lane<W>(d, lane) : 0, storage);
  }
}

__global__ void __launch_bounds__(kDeltaTileLanes) count_kernel(const DeltaLanes d) {
  __shared__ Reduce::TempStorage storage;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    const DeltaLaneCount c = lane >= 0 ? delta_count_lane(d, lane) : DeltaLaneCount{};
    store_tile(d, tile, c.bits, c.past_end, storage);
  }
}

// The lane's first rank: its tile's offset plus the bits of the tile's lanes before it.
__device__ std::uint64_t rank_of(const DeltaLanes& d, std::int64_t tile, std::uint64_t bits,
                                 Scan::TempStorage& storage) {
  std::uint64_t before = 0;
  Scan(storage).ExclusiveSum(bits, before);
  __syncthreads();
  return d.tile_count[tile] + before;
}

template <int W>
__global__ void __launch_bounds__(kDeltaTileLanes) write_kernel(const DeltaLanes d) {
  __shared__ Scan::TempStorage storage;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    const std::uint64_t bits = lane >= 0 ? delta_popcount(d.mask[lane]) : 0;
    const std::uint64_t rank = rank_of(d, tile, bits, storage);
    if (lane >= 0) delta_write_lane<W>(d, lane, rank);
  }
}

template <int W>
__global__ void __launch_bounds__(kDeltaTileLanes) check_kernel(const DeltaLanes d) {
  __shared__ Scan::TempStorage scan;
  __shared__ Reduce::TempStorage reduce;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    const std::uint64_t bits = lane >= 0 ? delta_count_lane(d, lane).bits : 0;
    const std::uint64_t rank = rank_of(d, tile, bits, scan);
    const std::uint64_t sum = lane >= 0 ? delta_check_lane<W>(d, lane, rank) : 0;
    const std::uint64_t tile_sum = Reduce(reduce).Sum(sum);
    __syncthreads();
    if (threadIdx.x == 0) d.tile_sum[tile] = tile_sum;
  }
}

template <int W>
__global__ void __launch_bounds__(kDeltaTileLanes) apply_kernel(const DeltaLanes d) {
  __shared__ Scan::TempStorage storage;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    const std::uint64_t bits = lane >= 0 ? delta_count_lane(d, lane).bits : 0;
    const std::uint64_t rank = rank_of(d, tile, bits, storage);
    if (lane >= 0) delta_apply_lane<W>(d, lane, rank);
  }
}

struct MaxOp {
  __device__ std::uint64_t operator()(std::uint64_t a, std::uint64_t b) const { return a > b ? a : b; }
};
struct MinOp {
  __device__ std::uint64_t operator()(std::uint64_t a, std::uint64_t b) const { return a < b ? a : b; }
};
struct ThenOp {
  __device__ DeltaWalks operator()(const DeltaWalks& a, const DeltaWalks& b) const {
    return delta_then(a, b);
  }
};

// The items [first, end) of this thread when one block of `threads` shares `items` in contiguous
// ranges.
__device__ void block_range(std::int64_t items, int threads, std::int64_t& first, std::int64_t& end) {
  const std::int64_t per = (items + threads - 1) / threads;
  first = threadIdx.x * per < items ? threadIdx.x * per : items;
  end = first + per < items ? first + per : items;
}

// One block: each thread a contiguous range of tiles, the threads' counts scanned in the block.
__global__ void __launch_bounds__(kPrefixThreads)
    tile_prefix_kernel(const DeltaLanes d, std::uint64_t* counts, const std::uint64_t* sums) {
  using PrefixScan = cub::BlockScan<std::uint64_t, kPrefixThreads>;
  using PrefixReduce = cub::BlockReduce<std::uint64_t, kPrefixThreads>;
  __shared__ typename PrefixScan::TempStorage scan;
  __shared__ typename PrefixReduce::TempStorage reduce;
  std::int64_t first = 0, end = 0;
  block_range(d.tiles, kPrefixThreads, first, end);
  std::uint64_t count = 0, sum = 0;
  for (std::int64_t t = first; t < end; ++t) {
    count += counts != nullptr ? counts[t] : 0;
    sum += sums != nullptr ? sums[t] : 0;
  }
  std::uint64_t offset = 0, total = 0;
  PrefixScan(scan).ExclusiveSum(count, offset, total);
  const std::uint64_t total_sum = PrefixReduce(reduce).Sum(sum);
  if (counts != nullptr)
    for (std::int64_t t = first; t < end; ++t) {
      const std::uint64_t c = counts[t];
      counts[t] = offset;
      offset += c;
    }
  if (threadIdx.x == 0) {
    d.totals[0] = total;
    d.totals[1] = total_sum;
    d.totals[2] = 0;
  }
}

// One block: lane_before is an exclusive max scan of the lanes' last ends from the left,
// lane_after an exclusive min scan of their first unchanged elements from the right (the block
// scans it over the threads in reverse order, through shared memory).
__global__ void __launch_bounds__(kPrefixThreads) lane_carries_kernel(const DeltaLanes d) {
  using CarryScan = cub::BlockScan<std::uint64_t, kPrefixThreads>;
  __shared__ typename CarryScan::TempStorage scan;
  __shared__ std::uint64_t mirror[kPrefixThreads];
  std::int64_t first = 0, end = 0;
  block_range(d.lanes, kPrefixThreads, first, end);
  std::uint64_t last = 0, clear = kDeltaNone;
  for (std::int64_t lane = first; lane < end; ++lane) {
    last = MaxOp{}(last, delta_lane_last_end(d, lane));
    clear = MinOp{}(clear, delta_lane_first_clear(d, lane));
  }
  std::uint64_t before = 0;
  CarryScan(scan).ExclusiveScan(last, before, std::uint64_t{0}, MaxOp{});
  const int t = static_cast<int>(threadIdx.x);
  mirror[kPrefixThreads - 1 - t] = clear;
  __syncthreads();
  const std::uint64_t reversed = mirror[t];
  __syncthreads();
  std::uint64_t after_reversed = 0;
  CarryScan(scan).ExclusiveScan(reversed, after_reversed, kDeltaNone, MinOp{});
  mirror[kPrefixThreads - 1 - t] = after_reversed;
  __syncthreads();
  std::uint64_t after = MinOp{}(mirror[t], static_cast<std::uint64_t>(d.elements));
  for (std::int64_t lane = first; lane < end; ++lane) {
    d.lane_before[lane] = before;
    before = MaxOp{}(before, delta_lane_last_end(d, lane));
  }
  for (std::int64_t lane = end - 1; lane >= first; --lane) {
    d.lane_after[lane] = after;
    after = MinOp{}(after, delta_lane_first_clear(d, lane));
  }
}

__global__ void __launch_bounds__(kDeltaTileLanes) positions_kernel(const DeltaLanes d) {
  __shared__ Reduce::TempStorage storage;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    const std::uint64_t bytes = Reduce(storage).Sum(lane >= 0 ? delta_position_bytes_lane(d, lane) : 0);
    __syncthreads();
    if (threadIdx.x == 0) d.tile_positions[tile] = bytes;
  }
}

template <int W>
__global__ void __launch_bounds__(kDeltaTileLanes) write_runs_kernel(const DeltaLanes d) {
  __shared__ Scan::TempStorage storage;
  for (std::int64_t tile = blockIdx.x; tile < d.tiles; tile += gridDim.x) {
    const std::int64_t lane = lane_of(d, tile);
    const std::uint64_t bits = lane >= 0 ? delta_popcount(d.mask[lane]) : 0;
    const std::uint64_t bytes = lane >= 0 ? delta_position_bytes_lane(d, lane) : 0;
    const std::uint64_t rank = rank_of(d, tile, bits, storage);
    std::uint64_t at = 0;
    Scan(storage).ExclusiveSum(bytes, at);
    __syncthreads();
    if (lane >= 0) delta_write_runs_lane<W>(d, lane, d.tile_positions[tile] + at, rank);
  }
}

// One block: each thread a contiguous range of segments; their walks scanned in the block give
// each range its entry, from which the thread walks again marking its runs.
__global__ void __launch_bounds__(kWalkThreads) runs_to_mask_kernel(const DeltaLanes d) {
  using WalkScan = cub::BlockScan<DeltaWalks, kWalkThreads>;
  __shared__ typename WalkScan::TempStorage scan;
  std::int64_t first = 0, end = 0;
  block_range(delta_segments_of(d.positions), kWalkThreads, first, end);
  DeltaWalks mine;
  for (std::int64_t segment = first; segment < end; ++segment)
    mine = delta_then(mine, delta_walks_of_segment(d, segment));
  DeltaWalks before, all;
  WalkScan(scan).ExclusiveScan(mine, before, DeltaWalks{}, ThenOp{}, all);
  DeltaWalk at = before.from[0];
  for (std::int64_t segment = first; segment < end; ++segment) {
    const DeltaWalk w = delta_walk_segment(d, segment, at.state, at.advance, DeltaMarkRuns{d});
    at = DeltaWalk{delta_saturate(at.advance, w.advance), 0, w.state, 0};
  }
  if (threadIdx.x == 0) {
    d.totals[0] = all.from[0].values;
    d.totals[1] = all.from[0].advance;
    d.totals[2] = all.from[0].bad | all.from[0].state;
  }
}

unsigned blocks_for(const DeltaLanes& d) {
  return static_cast<unsigned>(d.tiles < kMaxGridBlocks ? d.tiles : kMaxGridBlocks);
}

// Launches the kernel `pick` gives for the chunk's element size (pick(integral_constant<int, W>)
// returns kernel<W>); nothing for a chunk without lanes.
template <class Pick>
cudaError_t launch_by_width(const DeltaLanes& d, cudaStream_t stream, Pick pick) {
  if (d.tiles == 0) return cudaSuccess;
  void (*kernel)(DeltaLanes) = with_delta_width(d.element_bytes, pick);
  kernel<<<blocks_for(d), kDeltaTileLanes, 0, stream>>>(d);
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_delta_scan(const DeltaLanes& d, cudaStream_t stream) {
  return launch_by_width(d, stream, [](auto w) { return &scan_kernel<decltype(w)::value>; });
}
cudaError_t launch_delta_write(const DeltaLanes& d, cudaStream_t stream) {
  return launch_by_width(d, stream, [](auto w) { return &write_kernel<decltype(w)::value>; });
}
cudaError_t launch_delta_checksum(const DeltaLanes& d, cudaStream_t stream) {
  return launch_by_width(d, stream, [](auto w) { return &checksum_kernel<decltype(w)::value>; });
}
cudaError_t launch_delta_check(const DeltaLanes& d, cudaStream_t stream) {
  return launch_by_width(d, stream, [](auto w) { return &check_kernel<decltype(w)::value>; });
}
cudaError_t launch_delta_apply(const DeltaLanes& d, cudaStream_t stream) {
  return launch_by_width(d, stream, [](auto w) { return &apply_kernel<decltype(w)::value>; });
}

cudaError_t launch_delta_count(const DeltaLanes& d, cudaStream_t stream) {
  if (d.tiles == 0) return cudaSuccess;
  count_kernel<<<blocks_for(d), kDeltaTileLanes, 0, stream>>>(d);
  return cudaGetLastError();
}

cudaError_t launch_delta_tile_prefix(const DeltaLanes& d, std::uint64_t* counts, const std::uint64_t* sums,
                                     cudaStream_t stream) {
  tile_prefix_kernel<<<1, kPrefixThreads, 0, stream>>>(d, counts, sums);
  return cudaGetLastError();
}

cudaError_t launch_delta_positions(const DeltaLanes& d, cudaStream_t stream) {
  if (d.tiles == 0) return cudaSuccess;
  lane_carries_kernel<<<1, kPrefixThreads, 0, stream>>>(d);
  positions_kernel<<<blocks_for(d), kDeltaTileLanes, 0, stream>>>(d);
  return cudaGetLastError();
}

cudaError_t launch_delta_write_runs(const DeltaLanes& d, cudaStream_t stream) {
  return launch_by_width(d, stream, [](auto w) { return &write_runs_kernel<decltype(w)::value>; });
}

cudaError_t launch_delta_runs_to_mask(const DeltaLanes& d, cudaStream_t stream) {
  if (d.lanes > 0) {
    const cudaError_t zeroed =
        cudaMemsetAsync(d.mask, 0, static_cast<std::size_t>(d.lanes) * sizeof(std::uint64_t), stream);
    if (zeroed != cudaSuccess) return zeroed;
  }
  runs_to_mask_kernel<<<1, kWalkThreads, 0, stream>>>(d);
  return cudaGetLastError();
}

}  // namespace refit::nccl_detail
