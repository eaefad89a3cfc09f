#pragma once
// The work of the quantize kernels, written once for both compilers: nvcc runs it on the GPU and
// the CPU tests (tests/quantize/kernel_body_test.cc) run the very same functions lane by lane
// against the reference vectors, so the kernels' indexing and maths are checked without a GPU.
// The per-element and per-block arithmetic is refit/quantize/fp8_rules.h, which the CPU
// quantizer calls too. C++20 only (nvcc compiles it).
//
// A block-aligned bf16 box is cut into tiles, one per scale block, numbered row-major over the
// scale shape (so tile t's scale is scales[t]). The lanes of a tile (TileLanes) each hold a few
// vectors of 8 consecutive elements of a row (one 16-byte load where the box's alignment allows):
// consecutive lanes take consecutive vectors of a row, so a warp reads whole 256- or 512-byte
// runs, every element is read once into registers, its block's amax is reduced from them (the
// kernel by warp shuffles), and each lane converts and writes its own vectors (8 bytes a store).
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "fast_divide.h"
#include "host_device.h"
#include "refit/quantize/fp8_rules.h"

namespace refit::nccl_detail {

inline constexpr int kMaxQuantizeDims = 8;
inline constexpr int kQuantizeThreads = 256;
inline constexpr int kVectorElements = 8;  // bf16 elements per 16-byte load

// How the lanes of a tile share it. block128 (128 x 128 tiles): the 256 threads of a block, each
// holding 8 vectors (rows lane / 16 + 16 p); mxfp8 (1 x 32 tiles): 4 lanes of a warp, a vector each.
template <QuantScheme S>
struct TileLanes;
template <>
struct TileLanes<QuantScheme::kFp8Block128> {
  static constexpr int band = 128;   // rows of a block (dim dims-2)
  static constexpr int width = 128;  // columns of a block (dim dims-1)
  static constexpr int lanes = kQuantizeThreads;
  static constexpr int vectors = 8;  // per lane
};
template <>
struct TileLanes<QuantScheme::kMxfp8> {
  static constexpr int band = 1;
  static constexpr int width = 32;
  static constexpr int lanes = 4;
  static constexpr int vectors = 1;
};

// 8 bf16 as their bits, element 2i in the low half of pair[i] (both compilers' targets are
// little-endian, so this is the memory order).
struct alignas(16) Bf16x8 {
  std::uint32_t pair[4] = {};
};

// What one lane of a tile holds in registers.
template <QuantScheme S>
struct LaneVectors {
  Bf16x8 v[TileLanes<S>::vectors];
};

struct DeviceQuantize {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  const std::uint16_t* src = nullptr;  // the box's first element, a block corner
  std::uint8_t* values = nullptr;      // row-major over the box
  unsigned char* scales = nullptr;     // row-major over its scale shape
  std::int32_t dims = 2;
  std::int64_t extent[kMaxQuantizeDims] = {};
  std::int64_t stride[kMaxQuantizeDims] = {};  // in elements
  std::int64_t bands = 0;                      // block rows of a matrix (dims-2 and dims-1)
  std::int64_t col_blocks = 0;
  std::int64_t tiles = 0;
  Divider by_col_blocks;
  Divider by_bands;
  Divider by_extent[kMaxQuantizeDims];  // of the outer dims (0 .. dims-3)
  bool vector_loads = false;            // every vector of 8 starts 16-byte aligned and is contiguous
  bool vector_stores = false;           // every 8 values start 8-byte aligned
};

// Where one tile's elements lie: their first element in the source and in `values`, and its size
// (ragged at the box's edge; 0 rows for a lane past the last tile).
struct Tile {
  std::int64_t src = 0;
  std::int64_t dst = 0;
  std::int32_t rows = 0;
  std::int32_t cols = 0;
};

// The kernel's view of a box; false when it has fewer than 2 or more than kMaxQuantizeDims dims.
// The block shape is quant_block of refit/core/quantization.h (tests check that they agree).
template <QuantScheme S>
bool make_device_quantize_as(const std::uint16_t* src, const std::int64_t* shape, const std::int64_t* strides,
                             int dims, std::uint8_t* values, unsigned char* scales, DeviceQuantize& q) {
  using G = TileLanes<S>;
  q = DeviceQuantize{.scheme = S, .src = src, .values = values, .scales = scales, .dims = dims};
  std::int64_t outer = 1;
  bool aligned_rows = reinterpret_cast<std::uintptr_t>(src) % 16 == 0 && strides[dims - 1] == 1;
  for (int d = 0; d < dims; ++d) {
    q.extent[d] = shape[d];
    q.stride[d] = strides[d];
    if (d < dims - 1) aligned_rows = aligned_rows && strides[d] % kVectorElements == 0;
    if (d < dims - 2) {
      outer *= shape[d];
      q.by_extent[d] = make_divider(static_cast<std::uint64_t>(shape[d]));
    }
  }
  q.bands = (shape[dims - 2] + G::band - 1) / G::band;
  q.col_blocks = (shape[dims - 1] + G::width - 1) / G::width;
  q.tiles = outer * q.bands * q.col_blocks;
  q.by_col_blocks = make_divider(static_cast<std::uint64_t>(q.col_blocks));
  q.by_bands = make_divider(static_cast<std::uint64_t>(q.bands));
  q.vector_loads = aligned_rows;
  q.vector_stores =
      reinterpret_cast<std::uintptr_t>(values) % 8 == 0 && shape[dims - 1] % kVectorElements == 0;
  return true;
}

inline bool make_device_quantize(QuantScheme scheme, const std::uint16_t* src, const std::int64_t* shape,
                                 const std::int64_t* strides, int dims, std::uint8_t* values,
                                 unsigned char* scales, DeviceQuantize& q) {
  if (dims < 2 || dims > kMaxQuantizeDims) return false;
  return scheme == QuantScheme::kMxfp8
             ? make_device_quantize_as<QuantScheme::kMxfp8>(src, shape, strides, dims, values, scales, q)
             : make_device_quantize_as<QuantScheme::kFp8Block128>(src, shape, strides, dims, values, scales,
                                                                  q);
}

template <QuantScheme S>
REFIT_QUANTIZE_HD inline Tile tile_of(const DeviceQuantize& q, std::int64_t t) {
  using G = TileLanes<S>;
  const std::int64_t rows = q.extent[q.dims - 2];
  const std::int64_t cols = q.extent[q.dims - 1];
  const auto [by_row, cb] = divide(q.by_col_blocks, t);
  const auto [outer_index, b] = divide(q.by_bands, by_row);
  std::int64_t outer = outer_index;
  std::int64_t src = 0;
  for (int d = q.dims - 3; d >= 0; --d) {
    const auto [rest, i] = divide(q.by_extent[d], outer);
    src += i * q.stride[d];
    outer = rest;
  }
  const std::int64_t row = b * G::band;
  const std::int64_t col = cb * G::width;
  Tile tile;
  tile.src = src + row * q.stride[q.dims - 2] + col * q.stride[q.dims - 1];
  tile.dst = (outer_index * rows + row) * cols + col;
  tile.rows = static_cast<std::int32_t>(rows - row < G::band ? rows - row : G::band);
  tile.cols = static_cast<std::int32_t>(cols - col < G::width ? cols - col : G::width);
  return tile;
}

// Vector v of a lane: its row in the tile, its first column, whether it lies in the tile (ragged
// at the box's edge) and whether wholly.
struct VectorPlace {
  int row = 0;
  int col = 0;
  bool inside = false;
  bool whole = false;
};
template <QuantScheme S>
REFIT_QUANTIZE_HD inline VectorPlace vector_place(const Tile& tile, int lane, int v) {
  using G = TileLanes<S>;
  constexpr int kPerRow = G::width / kVectorElements;  // a power of two: shifts
  const int index = lane + v * G::lanes;
  const int row = index / kPerRow;
  const int col = index % kPerRow * kVectorElements;
  return {row, col, row < tile.rows && col < tile.cols, col + kVectorElements <= tile.cols};
}

REFIT_QUANTIZE_HD inline Bf16x8 load_vector(const std::uint16_t* at) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Bf16x8*>(at);
#else
  Bf16x8 v;
  std::memcpy(v.pair, at, sizeof v.pair);
  return v;
#endif
}

// A lane's vectors of a tile into registers (elements outside the tile are 0, which no amax
// notices and nothing stores).
template <QuantScheme S>
REFIT_QUANTIZE_HD inline void load_lane(const DeviceQuantize& q, const Tile& tile, int lane,
                                        LaneVectors<S>& held) {
  const std::int64_t row_stride = q.stride[q.dims - 2];
  const std::int64_t col_stride = q.stride[q.dims - 1];
  REFIT_UNROLL
  for (int v = 0; v < TileLanes<S>::vectors; ++v) {
    const VectorPlace p = vector_place<S>(tile, lane, v);
    held.v[v] = Bf16x8{};
    if (!p.inside) continue;
    const std::uint16_t* at = q.src + tile.src + p.row * row_stride + p.col * col_stride;
    if (q.vector_loads && p.whole) {
      held.v[v] = load_vector(at);
      continue;
    }
    REFIT_UNROLL
    for (int i = 0; i < kVectorElements; ++i)
      if (p.col + i < tile.cols)
        held.v[v].pair[i / 2] |= static_cast<std::uint32_t>(at[i * col_stride]) << (16 * (i % 2));
  }
}

// Step 1 of fp8_rules.h over a lane's vectors: the largest |x| bits.
template <QuantScheme S>
REFIT_QUANTIZE_HD inline std::uint16_t lane_amax(const LaneVectors<S>& held) {
  std::uint32_t amax = 0;
  REFIT_UNROLL
  for (int v = 0; v < TileLanes<S>::vectors; ++v) REFIT_UNROLL
  for (int k = 0; k < 4; ++k) {
    const std::uint32_t low = fp8::abs_bits(static_cast<std::uint16_t>(held.v[v].pair[k]));
    const std::uint32_t high = fp8::abs_bits(static_cast<std::uint16_t>(held.v[v].pair[k] >> 16));
    amax = low > amax ? low : amax;
    amax = high > amax ? high : amax;
  }
  return static_cast<std::uint16_t>(amax);
}

// Two fp32 products as e4m3 bytes, the first in the low byte. `finite`: neither is NaN or
// infinite (their block's amax is finite), so on GPUs with an fp8 conversion instruction (sm_89
// on) one instruction rounds both as fp32_to_e4m3 does: to nearest even, saturating at 448
// (tests/gpu checks every finite fp32). Otherwise fp32_to_e4m3, which writes NaN as refit's one
// encoding, 0x7F.
REFIT_QUANTIZE_HD inline std::uint32_t e4m3_pair(float low, float high, bool finite) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890
  if (finite) {
    std::uint16_t both = 0;
    asm("cvt.rn.satfinite.e4m3x2.f32 %0, %1, %2;" : "=h"(both) : "f"(high), "f"(low));
    return both;
  }
#else
  (void)finite;
#endif
  return fp8::fp32_to_e4m3(low) | static_cast<std::uint32_t>(fp8::fp32_to_e4m3(high)) << 8;
}

// Step 3 for two elements (bf16 bits, the first in the low half), as two e4m3 bytes.
REFIT_QUANTIZE_HD inline std::uint32_t quantize_pair(std::uint32_t pair, float multiplier, bool finite) {
  return e4m3_pair(fp8::multiply_rn(fp8::float_from_bits(pair << 16), multiplier),
                   fp8::multiply_rn(fp8::float_from_bits(pair & 0xFFFF0000u), multiplier), finite);
}

REFIT_QUANTIZE_HD inline void store_values(std::uint8_t* at, std::uint32_t low, std::uint32_t high) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint2*>(at) = make_uint2(low, high);
#else
  std::memcpy(at, &low, 4);
  std::memcpy(at + 4, &high, 4);
#endif
}

// Step 3 for a lane's vectors: scaled by the block's multiplier, rounded, written to `values`.
template <QuantScheme S>
REFIT_QUANTIZE_HD inline void store_lane(const DeviceQuantize& q, const Tile& tile, int lane,
                                         const LaneVectors<S>& held, const fp8::BlockScale& s, bool finite) {
  const std::int64_t cols = q.extent[q.dims - 1];
  REFIT_UNROLL
  for (int v = 0; v < TileLanes<S>::vectors; ++v) {
    const VectorPlace p = vector_place<S>(tile, lane, v);
    if (!p.inside) continue;
    std::uint32_t bytes[4];
    REFIT_UNROLL
    for (int k = 0; k < 4; ++k) bytes[k] = quantize_pair(held.v[v].pair[k], s.multiplier, finite);
    std::uint8_t* at = q.values + tile.dst + p.row * cols + p.col;
    if (q.vector_stores && p.whole) {
      store_values(at, bytes[0] | bytes[1] << 16, bytes[2] | bytes[3] << 16);
      continue;
    }
    REFIT_UNROLL
    for (int i = 0; i < kVectorElements; ++i)
      if (p.col + i < tile.cols) at[i] = static_cast<std::uint8_t>(bytes[i / 2] >> (8 * (i % 2)));
  }
}

// Stores tile t's scale (step 2, fp8::block_scale, gives it from the lanes' reduced amax).
REFIT_QUANTIZE_HD inline void store_tile_scale(const DeviceQuantize& q, std::int64_t t,
                                               const fp8::BlockScale& s) {
  fp8::store_scale(q.scheme, s, q.scales + t * fp8::scale_bytes(q.scheme));
}

// Whether a block's products are all finite (its amax is neither Inf nor NaN).
REFIT_QUANTIZE_HD inline bool finite_block(std::uint16_t amax) { return amax < fp8::kBf16Inf; }

// The kernel's work on the host: every tile, every lane in the kernel's own mapping, the lanes'
// amax reduced as its shuffles reduce them.
template <QuantScheme S>
void run_quantize_on_host_as(const DeviceQuantize& q) {
  using G = TileLanes<S>;
  std::vector<LaneVectors<S>> held(G::lanes);
  for (std::int64_t t = 0; t < q.tiles; ++t) {
    const Tile tile = tile_of<S>(q, t);
    std::uint16_t amax = 0;
    for (int lane = 0; lane < G::lanes; ++lane) {
      load_lane<S>(q, tile, lane, held[lane]);
      const std::uint16_t a = lane_amax<S>(held[lane]);
      amax = a > amax ? a : amax;
    }
    const fp8::BlockScale scale = fp8::block_scale(S, amax);
    for (int lane = 0; lane < G::lanes; ++lane)
      store_lane<S>(q, tile, lane, held[lane], scale, finite_block(amax));
    store_tile_scale(q, t, scale);
  }
}

inline void run_quantize_on_host(const DeviceQuantize& q) {
  if (q.scheme == QuantScheme::kMxfp8)
    run_quantize_on_host_as<QuantScheme::kMxfp8>(q);
  else
    run_quantize_on_host_as<QuantScheme::kFp8Block128>(q);
}

}  // namespace refit::nccl_detail
