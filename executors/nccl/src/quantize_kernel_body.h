#pragma once
// The work of the quantize kernel, written once for both compilers: nvcc runs it on the GPU and
// the CPU tests (tests/quantize/kernel_body_test.cc) run the very same functions lane by lane
// against the reference vectors, so the kernel's indexing and maths are checked without a GPU.
// The per-element and per-block arithmetic is refit/quantize/fp8_rules.h, which the CPU
// quantizer calls too. C++20 only (nvcc compiles it).
//
// A block-aligned bf16 box is cut into tiles, one per scale block, numbered row-major over the
// scale shape (so tile t's scale is scales[t]). `lanes` threads share a tile (256 per thread
// block for block128's 128x128 tiles, one warp for mxfp8's 1x32): each takes a column of the
// tile (lane % width) and every (lanes / width)-th row, so consecutive lanes touch consecutive
// addresses. The kernel reduces the lanes' partial amax and broadcasts the block's scale.
#include <cstddef>
#include <cstdint>

#include "refit/quantize/fp8_rules.h"

namespace refit::nccl_detail {

inline constexpr int kMaxQuantizeDims = 8;
inline constexpr int kQuantizeThreads = 256;

// The lanes that share one tile: a thread block for block128, a warp for mxfp8.
constexpr int quantize_lanes(QuantScheme s) { return s == QuantScheme::kMxfp8 ? 32 : kQuantizeThreads; }

struct DeviceQuantize {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  const std::uint16_t* src = nullptr;  // the box's first element, a block corner
  std::uint8_t* values = nullptr;      // row-major over the box
  unsigned char* scales = nullptr;     // row-major over its scale shape
  std::int32_t dims = 2;
  std::int64_t extent[kMaxQuantizeDims] = {};
  std::int64_t stride[kMaxQuantizeDims] = {};  // in elements
  std::int32_t band = 1;                       // rows of a block (dim dims-2)
  std::int32_t width = 1;                      // columns of a block (dim dims-1)
  std::int64_t bands = 0;
  std::int64_t col_blocks = 0;
  std::int64_t tiles = 0;
};

// Where one tile's elements lie: their first element in the source and in `values`, and its size
// (ragged at the box's edge).
struct Tile {
  std::int64_t src = 0;
  std::int64_t dst = 0;
  std::int32_t rows = 0;
  std::int32_t cols = 0;
};

// The kernel's view of a box; false when it has fewer than 2 or more than kMaxQuantizeDims dims.
// The block shape is quant_block of refit/core/quantization.h (tests check that they agree).
inline bool make_device_quantize(QuantScheme scheme, const std::uint16_t* src, const std::int64_t* shape,
                                 const std::int64_t* strides, int dims, std::uint8_t* values,
                                 unsigned char* scales, DeviceQuantize& q) {
  if (dims < 2 || dims > kMaxQuantizeDims) return false;
  q = DeviceQuantize{.scheme = scheme, .src = src, .values = values, .scales = scales, .dims = dims};
  std::int64_t outer = 1;
  for (int d = 0; d < dims; ++d) {
    q.extent[d] = shape[d];
    q.stride[d] = strides[d];
    if (d < dims - 2) outer *= shape[d];
  }
  q.band = scheme == QuantScheme::kMxfp8 ? 1 : 128;
  q.width = scheme == QuantScheme::kMxfp8 ? 32 : 128;
  q.bands = (shape[dims - 2] + q.band - 1) / q.band;
  q.col_blocks = (shape[dims - 1] + q.width - 1) / q.width;
  q.tiles = outer * q.bands * q.col_blocks;
  return true;
}

REFIT_QUANTIZE_HD inline Tile tile_of(const DeviceQuantize& q, std::int64_t t) {
  const std::int64_t rows = q.extent[q.dims - 2];
  const std::int64_t cols = q.extent[q.dims - 1];
  const std::int64_t cb = t % q.col_blocks;
  const std::int64_t b = (t / q.col_blocks) % q.bands;
  std::int64_t outer = t / q.col_blocks / q.bands;
  const std::int64_t outer_index = outer;
  std::int64_t src = 0;
  for (int d = q.dims - 3; d >= 0; --d) {
    src += (outer % q.extent[d]) * q.stride[d];
    outer /= q.extent[d];
  }
  const std::int64_t row = b * q.band;
  const std::int64_t col = cb * q.width;
  Tile tile;
  tile.src = src + row * q.stride[q.dims - 2] + col * q.stride[q.dims - 1];
  tile.dst = (outer_index * rows + row) * cols + col;
  tile.rows = static_cast<std::int32_t>(rows - row < q.band ? rows - row : q.band);
  tile.cols = static_cast<std::int32_t>(cols - col < q.width ? cols - col : q.width);
  return tile;
}

// Step 1 of fp8_rules.h for one lane: the largest |x| bits among its elements of the tile.
REFIT_QUANTIZE_HD inline std::uint16_t tile_partial_amax(const DeviceQuantize& q, const Tile& tile, int lane,
                                                         int lanes) {
  const int col = lane % q.width;
  const std::int64_t row_stride = q.stride[q.dims - 2];
  const std::uint16_t* at = q.src + tile.src + col * q.stride[q.dims - 1];
  std::uint16_t amax = 0;
  if (col >= tile.cols) return amax;
  for (int r = lane / q.width; r < tile.rows; r += lanes / q.width) {
    const std::uint16_t a = fp8::abs_bits(at[r * row_stride]);
    amax = a > amax ? a : amax;
  }
  return amax;
}

// Step 3 for one lane: its elements of the tile, scaled by the block's multiplier, into values.
REFIT_QUANTIZE_HD inline void tile_convert(const DeviceQuantize& q, const Tile& tile, float multiplier,
                                           int lane, int lanes) {
  const int col = lane % q.width;
  if (col >= tile.cols) return;
  const std::int64_t row_stride = q.stride[q.dims - 2];
  const std::int64_t cols = q.extent[q.dims - 1];
  const std::uint16_t* from = q.src + tile.src + col * q.stride[q.dims - 1];
  std::uint8_t* to = q.values + tile.dst + col;
  for (int r = lane / q.width; r < tile.rows; r += lanes / q.width)
    to[r * cols] = fp8::quantize_element(from[r * row_stride], multiplier);
}

// Stores tile t's scale (step 2, fp8::block_scale, gives it from the lanes' reduced amax).
REFIT_QUANTIZE_HD inline void store_tile_scale(const DeviceQuantize& q, std::int64_t t,
                                               const fp8::BlockScale& s) {
  fp8::store_scale(q.scheme, s, q.scales + t * fp8::scale_bytes(q.scheme));
}

// The kernel's work on the host: every tile, every lane in the kernel's own mapping, the lanes'
// amax reduced as its shuffles reduce them. The CPU stand-ins of the executor run this.
inline void run_quantize_on_host(const DeviceQuantize& q) {
  const int lanes = quantize_lanes(q.scheme);
  for (std::int64_t t = 0; t < q.tiles; ++t) {
    const Tile tile = tile_of(q, t);
    std::uint16_t amax = 0;
    for (int lane = 0; lane < lanes; ++lane) {
      const std::uint16_t a = tile_partial_amax(q, tile, lane, lanes);
      amax = a > amax ? a : amax;
    }
    const fp8::BlockScale scale = fp8::block_scale(q.scheme, amax);
    for (int lane = 0; lane < lanes; ++lane) tile_convert(q, tile, scale.multiplier, lane, lanes);
    store_tile_scale(q, t, scale);
  }
}

}  // namespace refit::nccl_detail
