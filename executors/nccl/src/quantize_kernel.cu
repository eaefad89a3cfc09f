#include "quantize_kernel.h"
#include "quantize_kernel_body.h"

namespace refit::nccl_detail {
namespace {

constexpr int kWarp = 32;
constexpr int kWarps = kQuantizeThreads / kWarp;
// Enough blocks to fill any current GPU several times over; more tiles are strided over them.
constexpr std::int64_t kMaxBlocks = 8192;

__device__ std::uint16_t warp_max(std::uint16_t v) {
  unsigned m = v;
  for (int offset = kWarp / 2; offset > 0; offset /= 2) {
    const unsigned other = __shfl_xor_sync(0xFFFFFFFFu, m, offset);
    m = other > m ? other : m;
  }
  return static_cast<std::uint16_t>(m);
}

// block128: a thread block per 128x128 tile; its warps' amax meet in shared memory.
__global__ void __launch_bounds__(kQuantizeThreads) quantize_tile_per_block(const DeviceQuantize q) {
  __shared__ std::uint16_t partial[kWarps];
  const int lane = static_cast<int>(threadIdx.x);
  for (std::int64_t t = blockIdx.x; t < q.tiles; t += gridDim.x) {
    const Tile tile = tile_of(q, t);
    const std::uint16_t mine = warp_max(tile_partial_amax(q, tile, lane, kQuantizeThreads));
    if (lane % kWarp == 0) partial[lane / kWarp] = mine;
    __syncthreads();
    std::uint16_t amax = 0;
    for (int w = 0; w < kWarps; ++w) amax = partial[w] > amax ? partial[w] : amax;
    const fp8::BlockScale s = fp8::block_scale(q.scheme, amax);
    tile_convert(q, tile, s.multiplier, lane, kQuantizeThreads);
    if (lane == 0) store_tile_scale(q, t, s);
    __syncthreads();  // every warp has read `partial` before the next tile overwrites it
  }
}

// mxfp8: a warp per 1x32 tile, a lane per element.
__global__ void __launch_bounds__(kQuantizeThreads) quantize_tile_per_warp(const DeviceQuantize q) {
  const int lane = static_cast<int>(threadIdx.x) % kWarp;
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * kWarps + threadIdx.x / kWarp;
  for (std::int64_t t = first; t < q.tiles; t += static_cast<std::int64_t>(gridDim.x) * kWarps) {
    const Tile tile = tile_of(q, t);
    const std::uint16_t amax = warp_max(tile_partial_amax(q, tile, lane, kWarp));
    const fp8::BlockScale s = fp8::block_scale(q.scheme, amax);
    tile_convert(q, tile, s.multiplier, lane, kWarp);
    if (lane == 0) store_tile_scale(q, t, s);
  }
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
    const std::int64_t blocks = (q.tiles + kWarps - 1) / kWarps;
    quantize_tile_per_warp<<<static_cast<unsigned>(blocks < kMaxBlocks ? blocks : kMaxBlocks),
                             kQuantizeThreads, 0, stream>>>(q);
  } else {
    quantize_tile_per_block<<<static_cast<unsigned>(q.tiles < kMaxBlocks ? q.tiles : kMaxBlocks),
                              kQuantizeThreads, 0, stream>>>(q);
  }
  return cudaGetLastError();
}

}  // namespace refit::nccl_detail
