#include "grid_limits.h"
#include "quantize_kernel.h"
#include "quantize_kernel_body.h"

namespace refit::nccl_detail {
namespace {

constexpr int kWarp = 32;
constexpr int kWarps = kQuantizeThreads / kWarp;
// mxfp8 tiles a thread takes part in at once: their loads are all in flight before the first
// is used (4 x 16 bytes per thread).
constexpr int kMxfp8TilesPerLane = 4;

// The largest of `v` over the `lanes` consecutive lanes of a warp that share a tile.
template <int Lanes>
__device__ std::uint16_t shuffle_max(std::uint16_t v) {
  unsigned m = v;
  for (int offset = Lanes / 2; offset > 0; offset /= 2) {
    const unsigned other = __shfl_xor_sync(0xFFFFFFFFu, m, offset);
    m = other > m ? other : m;
  }
  return static_cast<std::uint16_t>(m);
}

// block128: a thread block per 128 x 128 tile, 8 vectors a thread; the warps' amax meet in
// shared memory.
__global__ void __launch_bounds__(kQuantizeThreads, 4) quantize_block128(const DeviceQuantize q) {
  constexpr QuantScheme S = QuantScheme::kFp8Block128;
  __shared__ std::uint16_t partial[kWarps];
  const int lane = static_cast<int>(threadIdx.x);
  for (std::int64_t t = blockIdx.x; t < q.tiles; t += gridDim.x) {
    const Tile tile = tile_of<S>(q, t);
    LaneVectors<S> held;
    load_lane<S>(q, tile, lane, held);
    const std::uint16_t mine = shuffle_max<kWarp>(lane_amax<S>(held));
    if (lane % kWarp == 0) partial[lane / kWarp] = mine;
    __syncthreads();
    std::uint16_t amax = 0;
    for (int w = 0; w < kWarps; ++w) amax = partial[w] > amax ? partial[w] : amax;
    const fp8::BlockScale s = fp8::block_scale(S, amax);
    store_lane<S>(q, tile, lane, held, s, finite_block(amax));
    if (lane == 0) store_tile_scale(q, t, s);
    __syncthreads();  // every warp has read `partial` before the next tile overwrites it
  }
}

// mxfp8: 4 lanes per 1 x 32 tile, kMxfp8TilesPerLane tiles a lane; a block covers
// 64 * kMxfp8TilesPerLane consecutive tiles per round. Every lane runs every round (the shuffles
// need the whole warp); lanes past the last tile hold an empty one.
__global__ void __launch_bounds__(kQuantizeThreads) quantize_mxfp8(const DeviceQuantize q) {
  constexpr QuantScheme S = QuantScheme::kMxfp8;
  constexpr int kLanes = TileLanes<S>::lanes;
  constexpr int kGroups = kQuantizeThreads / kLanes;
  const int lane = static_cast<int>(threadIdx.x) % kLanes;
  const int group = static_cast<int>(threadIdx.x) / kLanes;
  const std::int64_t per_round = std::int64_t{kGroups} * kMxfp8TilesPerLane;
  for (std::int64_t first = blockIdx.x * per_round; first < q.tiles; first += gridDim.x * per_round) {
    Tile tile[kMxfp8TilesPerLane];
    LaneVectors<S> held[kMxfp8TilesPerLane];
#pragma unroll
    for (int j = 0; j < kMxfp8TilesPerLane; ++j) {
      const std::int64_t t = first + j * kGroups + group;
      tile[j] = t < q.tiles ? tile_of<S>(q, t) : Tile{};
      load_lane<S>(q, tile[j], lane, held[j]);
    }
#pragma unroll
    for (int j = 0; j < kMxfp8TilesPerLane; ++j) {
      const std::uint16_t amax = shuffle_max<kLanes>(lane_amax<S>(held[j]));
      const fp8::BlockScale s = fp8::block_scale(S, amax);
      store_lane<S>(q, tile[j], lane, held[j], s, finite_block(amax));
      const std::int64_t t = first + j * kGroups + group;
      if (lane == 0 && t < q.tiles) store_tile_scale(q, t, s);
    }
  }
}

unsigned blocks_for(std::int64_t work) {
  return static_cast<unsigned>(work < kMaxGridBlocks ? work : kMaxGridBlocks);
}

}  // namespace

cudaError_t launch_quantize(QuantScheme scheme, const std::uint16_t* src, const std::int64_t* shape,
                            const std::int64_t* strides, int dims, std::uint8_t* values, void* scales,
                            cudaStream_t stream) {
  DeviceQuantize q;
  if (!make_device_quantize(scheme, src, shape, strides, dims, values, static_cast<unsigned char*>(scales),
                            q))
    return cudaErrorInvalidValue;
  if (q.tiles == 0) return cudaSuccess;
  if (scheme == QuantScheme::kMxfp8) {
    const std::int64_t per_block =
        std::int64_t{kQuantizeThreads} / TileLanes<QuantScheme::kMxfp8>::lanes * kMxfp8TilesPerLane;
    quantize_mxfp8<<<blocks_for((q.tiles + per_block - 1) / per_block), kQuantizeThreads, 0, stream>>>(q);
  } else {
    quantize_block128<<<blocks_for(q.tiles), kQuantizeThreads, 0, stream>>>(q);
  }
  return cudaGetLastError();
}

}  // namespace refit::nccl_detail
