#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>

#include "delta_kernel.h"

namespace refit::nccl_detail {
namespace {

// Tiles are strided over at most this many blocks (enough to fill every multiprocessor of
// current GPUs several times over).
constexpr std::int64_t kMaxBlocks = 8192;
constexpr int kPrefixThreads = 1024;

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

// One block: each thread a contiguous range of tiles, the threads' counts scanned in the block.
__global__ void __launch_bounds__(kPrefixThreads) tile_prefix_kernel(const DeltaLanes d, bool offsets) {
  using PrefixScan = cub::BlockScan<std::uint64_t, kPrefixThreads>;
  using PrefixReduce = cub::BlockReduce<std::uint64_t, kPrefixThreads>;
  __shared__ typename PrefixScan::TempStorage scan;
  __shared__ typename PrefixReduce::TempStorage reduce;
  const std::int64_t per = (d.tiles + kPrefixThreads - 1) / kPrefixThreads;
  const std::int64_t first = threadIdx.x * per;
  const std::int64_t end = first + per < d.tiles ? first + per : d.tiles;
  std::uint64_t count = 0, sum = 0;
  for (std::int64_t t = first; t < end; ++t) {
    count += d.tile_count[t];
    sum += d.tile_sum[t];
  }
  std::uint64_t offset = 0, total = 0;
  PrefixScan(scan).ExclusiveSum(count, offset, total);
  const std::uint64_t total_sum = PrefixReduce(reduce).Sum(sum);
  if (offsets)
    for (std::int64_t t = first; t < end; ++t) {
      const std::uint64_t c = d.tile_count[t];
      d.tile_count[t] = offset;
      offset += c;
    }
  if (threadIdx.x == 0) {
    d.totals[0] = total;
    d.totals[1] = total_sum;
  }
}

unsigned blocks_for(const DeltaLanes& d) {
  return static_cast<unsigned>(d.tiles < kMaxBlocks ? d.tiles : kMaxBlocks);
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

cudaError_t launch_delta_tile_prefix(const DeltaLanes& d, bool offsets, cudaStream_t stream) {
  tile_prefix_kernel<<<1, kPrefixThreads, 0, stream>>>(d, offsets);
  return cudaGetLastError();
}

}  // namespace refit::nccl_detail
