#pragma once
// The work of the batched box-copy kernel, written once for both compilers: nvcc runs it on the
// GPU, and the CPU tests run the very same index arithmetic on the host, so the kernel's maths is
// checked without a GPU. C++20 only (nvcc compiles it), no refit headers.
//
// A copy moves a box walked row-major, units [first, first + count) of it, from one strided array
// to another. The kernel's work is cut into items: an item is either one tile of one long row or
// several short rows, so each of the kCopyThreads threads of a block moves up to kCopyUnroll units
// and consecutive threads touch consecutive addresses.
#include <cstddef>
#include <cstdint>

#ifdef __CUDACC__
#define REFIT_HOST_DEVICE __host__ __device__
#else
#define REFIT_HOST_DEVICE
#endif

namespace refit::nccl_detail {

inline constexpr int kMaxCopyDims = 8;
inline constexpr int kCopyThreads = 256;
inline constexpr int kCopyUnroll = 4;

// 16 bytes moved as one: nvcc turns the copy of this aligned struct into a 128-bit load and store.
struct alignas(16) Unit16 {
  unsigned long long low;
  unsigned long long high;
};

struct DeviceCopy {
  const std::byte* src = nullptr;  // the box's first element in each array
  std::byte* dst = nullptr;
  std::int32_t dims = 1;  // after merging, innermost last
  std::int32_t unit = 1;  // bytes moved per access: 1, 2, 4, 8 or 16
  std::int64_t extent[kMaxCopyDims] = {};
  std::int64_t src_stride[kMaxCopyDims] = {};  // in units
  std::int64_t dst_stride[kMaxCopyDims] = {};
  std::int64_t first = 0;  // units of the box, row-major
  std::int64_t count = 0;
  std::int32_t lanes = 1;  // threads per row
  std::int64_t tile = 1;   // units of a row one item covers
  std::int64_t tiles_per_row = 1;
  std::int64_t rows_per_item = 1;
  std::int64_t items = 0;
  std::int64_t item_begin = 0;  // items of the copies before this one in its batch
};

template <class Unit>
REFIT_HOST_DEVICE inline void copy_item_as(const DeviceCopy& c, std::int64_t item, int thread) {
  // Read once: the stores below may alias `c` as far as the compiler knows.
  const std::int64_t lanes = c.lanes;
  const std::int64_t inner = c.extent[c.dims - 1];
  const std::int64_t first_row = c.first / inner;
  const std::int64_t last_row = (c.first + c.count - 1) / inner;
  const std::int64_t row = first_row + (item / c.tiles_per_row) * c.rows_per_item + thread / lanes;
  if (row > last_row) return;
  const std::int64_t lo = row == first_row ? c.first - row * inner : 0;
  const std::int64_t hi = row == last_row ? c.first + c.count - row * inner : inner;
  std::int64_t src = 0;
  std::int64_t dst = 0;
  std::int64_t rest = row;
  for (int d = c.dims - 2; d >= 0; --d) {
    const std::int64_t i = rest % c.extent[d];
    rest /= c.extent[d];
    src += i * c.src_stride[d];
    dst += i * c.dst_stride[d];
  }
  const std::int64_t tile_begin = (item % c.tiles_per_row) * c.tile;
  const std::int64_t end = hi < tile_begin + c.tile ? hi : tile_begin + c.tile;
  const auto* from = reinterpret_cast<const Unit*>(c.src);
  auto* to = reinterpret_cast<Unit*>(c.dst);
  const std::int64_t si = c.src_stride[c.dims - 1];
  const std::int64_t di = c.dst_stride[c.dims - 1];
  // All loads first, then all stores: kCopyUnroll independent loads in flight per thread.
  Unit held[kCopyUnroll]{};
  for (int j = 0; j < kCopyUnroll; ++j) {
    const std::int64_t col = tile_begin + thread % lanes + j * lanes;
    if (col >= lo && col < end) held[j] = from[src + col * si];
  }
  for (int j = 0; j < kCopyUnroll; ++j) {
    const std::int64_t col = tile_begin + thread % lanes + j * lanes;
    if (col >= lo && col < end) to[dst + col * di] = held[j];
  }
}

// One thread's share of item `item` (counted from the copy's own first item).
REFIT_HOST_DEVICE inline void copy_item(const DeviceCopy& c, std::int64_t item, int thread) {
  switch (c.unit) {
    case 1:
      copy_item_as<std::uint8_t>(c, item, thread);
      break;
    case 2:
      copy_item_as<std::uint16_t>(c, item, thread);
      break;
    case 4:
      copy_item_as<std::uint32_t>(c, item, thread);
      break;
    case 8:
      copy_item_as<unsigned long long>(c, item, thread);
      break;
    default:
      copy_item_as<Unit16>(c, item, thread);
      break;
  }
}

// The copy of a batch that owns batch-wide item `item` (copies ordered by item_begin).
REFIT_HOST_DEVICE inline int find_copy(const DeviceCopy* copies, int n, std::int64_t item) {
  int lo = 0;
  int hi = n - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (copies[mid].item_begin <= item)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

}  // namespace refit::nccl_detail
