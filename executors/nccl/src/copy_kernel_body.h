#pragma once
// The work of the batched box-copy kernel, written once for both compilers: nvcc runs it on the
// GPU, and the CPU tests run the very same code on the host thread by thread, so the kernel's
// index arithmetic is checked without a GPU. C++20 only (nvcc compiles it), no refit headers.
//
// A copy moves a box walked row-major, elements [first, first + count) of it, from one strided
// array to another; a row is the box's innermost dim. A row moves one of two ways:
//   bytes     the innermost dim is contiguous on both sides: the row is a run of bytes, and a
//             thread writes whole aligned 16-byte words of the destination run. Where the source
//             lies at the same offset modulo 16 a word is one 16-byte load; elsewhere it is the
//             two aligned 16-byte source words around it, shifted (a funnel shift), so any
//             alignment moves 16 bytes a store. A run's partial first and last words go byte by
//             byte.
//   elements  the innermost dim is strided on a side (or the row is short and misaligned): a
//             thread moves single units of 1, 2, 4 or 8 bytes.
// The work is cut into items, one thread block's share: kCopyThreads threads, `lanes` of them per
// row (consecutive threads, consecutive addresses), each moving up to kCopySlots words or units,
// all loaded before any is stored so that they are in flight together. The slots of a thread go
// along its row (`col_passes` of them) and then over further rows, so an item is a tile of a long
// row or several whole short rows.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "fast_divide.h"
#include "host_device.h"

namespace refit::nccl_detail {

inline constexpr int kMaxCopyDims = 8;
inline constexpr int kCopyThreads = 256;
inline constexpr int kCopySlots = 8;  // 16-byte words or units a thread moves per item

enum class CopyMode : std::int32_t { kBytes, kElements };

struct DeviceCopy {
  const std::byte* src = nullptr;  // the box's first element in each array
  std::byte* dst = nullptr;
  CopyMode mode = CopyMode::kElements;
  std::int32_t dims = 1;  // after merging, innermost last
  std::int32_t unit = 1;  // kElements: bytes a thread moves per access (1, 2, 4 or 8); kBytes: 16
  std::int64_t src_stride[kMaxCopyDims] = {};  // in bytes
  std::int64_t dst_stride[kMaxCopyDims] = {};
  Divider by_extent[kMaxCopyDims];  // the extents of dims 1 .. dims-2 (rows split into coordinates)
  bool rows_below_2_32 = false;     // every row index and those extents are below 2^32
  std::int64_t row_length = 0;      // of a whole row: bytes (kBytes) or units (kElements)
  std::int64_t first_row = 0;       // the rows of the range, and where it starts in its first
  std::int64_t last_row = 0;        // row and ends in its last, in the row's measure
  std::int64_t first_lo = 0;
  std::int64_t last_hi = 0;
  std::int32_t lanes_log2 = 0;       // threads per row
  std::int32_t col_passes_log2 = 0;  // slots a thread spends along one row
  std::int64_t rows_per_item = 1;
  std::int64_t tile = 1;         // words or units of a row one item covers
  std::int64_t first_tiles = 0;  // items of the first row alone (long rows), else 0
  std::int64_t rows_begin = 0;   // the first row of item first_tiles
  Divider by_tiles_per_row;
  std::int64_t items = 0;
  std::int64_t item_begin = 0;  // items of the copies before this one in its batch
};

// 16 bytes moved as one: an aligned 128-bit load or store on the GPU.
struct alignas(16) Word16 {
  std::uint32_t w[4] = {};
};

REFIT_HOST_DEVICE Word16 load_word(std::uintptr_t at) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Word16*>(at);
#else
  Word16 v;
  std::memcpy(v.w, reinterpret_cast<const void*>(at), sizeof v.w);
  return v;
#endif
}

REFIT_HOST_DEVICE void store_word(std::uintptr_t at, const Word16& v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Word16*>(at) = v;
#else
  std::memcpy(reinterpret_cast<void*>(at), v.w, sizeof v.w);
#endif
}

// A unit of a kElements copy (memcpy on the host, where the buffers are bytes).
template <class Unit>
REFIT_HOST_DEVICE Unit load_unit(std::uintptr_t at) {
#if defined(__CUDA_ARCH__)
  return *reinterpret_cast<const Unit*>(at);
#else
  Unit v;
  std::memcpy(&v, reinterpret_cast<const void*>(at), sizeof v);
  return v;
#endif
}

template <class Unit>
REFIT_HOST_DEVICE void store_unit(std::uintptr_t at, Unit v) {
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<Unit*>(at) = v;
#else
  std::memcpy(reinterpret_cast<void*>(at), &v, sizeof v);
#endif
}

// The aligned source word at `at`, of which only bytes in [lo, hi) belong to the row: one load
// when all do, else those bytes one by one (the others stay 0 and are never used), so nothing
// outside the row is read.
REFIT_HOST_DEVICE Word16 load_word_within(std::uintptr_t at, std::uintptr_t lo, std::uintptr_t hi) {
  if (at >= lo && at + 16 <= hi) return load_word(at);
  Word16 v;
  for (int i = 0; i < 16; ++i)
    if (at + i >= lo && at + i < hi)
      v.w[i / 4] |= static_cast<std::uint32_t>(*reinterpret_cast<const std::uint8_t*>(at + i))
                    << (8 * (i % 4));
  return v;
}

// Bits [r, r + 32) of the 64 bits high:low.
REFIT_HOST_DEVICE std::uint32_t funnel_shift(std::uint32_t low, std::uint32_t high, unsigned r) {
#if defined(__CUDA_ARCH__)
  return __funnelshift_r(low, high, r);
#else
  return r == 0 ? low : (low >> r) | (high << (32 - r));
#endif
}

// Bytes [k, k + 16) of the 32 bytes a then b (little-endian words), 0 <= k < 16. Selects, not an
// indexed array, so the words stay in registers.
REFIT_HOST_DEVICE Word16 shift_bytes(const Word16& a, const Word16& b, int k) {
  const std::uint32_t x[8] = {a.w[0], a.w[1], a.w[2], a.w[3], b.w[0], b.w[1], b.w[2], b.w[3]};
  const int q = k / 4;
  const unsigned r = 8u * static_cast<unsigned>(k % 4);
  std::uint32_t y[5];
  REFIT_UNROLL
  for (int i = 0; i < 5; ++i) y[i] = q == 0 ? x[i] : q == 1 ? x[i + 1] : q == 2 ? x[i + 2] : x[i + 3];
  Word16 out;
  REFIT_UNROLL
  for (int i = 0; i < 4; ++i) out.w[i] = funnel_shift(y[i], y[i + 1], r);
  return out;
}

// The first element of row `row` (a row-major index over the box's outer dims) in each array.
struct RowStart {
  std::uintptr_t src = 0;
  std::uintptr_t dst = 0;
};
// Integer arithmetic: a box's origin may lie outside its buffer (only elements inside are touched).
REFIT_HOST_DEVICE RowStart row_at(const DeviceCopy& c, std::int64_t s, std::int64_t d) {
  return {reinterpret_cast<std::uintptr_t>(c.src) + static_cast<std::uintptr_t>(s),
          reinterpret_cast<std::uintptr_t>(c.dst) + static_cast<std::uintptr_t>(d)};
}

// Any number of outer dims, any sizes.
REFIT_HOST_DEVICE_OUTLINED RowStart row_start_any(const DeviceCopy& c, std::int64_t row) {
  std::int64_t s = 0;
  std::int64_t d = 0;
  for (int dim = c.dims - 2; dim >= 1; --dim) {
    const auto [rest, i] = divide(c.by_extent[dim], row);
    s += i * c.src_stride[dim];
    d += i * c.dst_stride[dim];
    row = rest;
  }
  if (c.dims >= 2) {
    s += row * c.src_stride[0];
    d += row * c.dst_stride[0];
  }
  return row_at(c, s, d);
}

// Up to two outer dims whose rows number below 2^32 (one 32-bit split at most): the common
// case, which the kernel runs inline (copy_item).
REFIT_HOST_DEVICE bool small_rows(const DeviceCopy& c) { return c.rows_below_2_32 && c.dims <= 3; }
REFIT_HOST_DEVICE RowStart row_start_small(const DeviceCopy& c, std::int64_t row) {
  if (c.dims == 1) return row_at(c, 0, 0);
  std::int64_t outer = row;
  std::int64_t s = 0;
  std::int64_t d = 0;
  if (c.dims == 3) {
    outer = quotient_32(c.by_extent[1], static_cast<std::uint32_t>(row));
    const std::int64_t i = row - outer * static_cast<std::int64_t>(c.by_extent[1].divisor);
    s = i * c.src_stride[1];
    d = i * c.dst_stride[1];
  }
  return row_at(c, s + outer * c.src_stride[0], d + outer * c.dst_stride[0]);
}

// Where slot j of a thread lies: its row, and its word or unit counted from where the copy's
// part of that row begins.
struct Slot {
  std::int64_t row = 0;
  std::int64_t at = 0;
};
struct ItemPlace {
  std::int64_t row = 0;   // the item's first row
  std::int64_t tile = 0;  // its first word or unit along the row
};
// Items [0, first_tiles) are the tiles of the first row (a long row's part may be much shorter
// than the row); the others cover rows_per_item rows from rows_begin on, tiles_per_row each.
REFIT_HOST_DEVICE ItemPlace item_place(const DeviceCopy& c, std::int64_t item) {
  if (item < c.first_tiles) return {c.first_row, item * c.tile};
  const auto [group, tile_index] = divide(c.by_tiles_per_row, item - c.first_tiles);
  return {c.rows_begin + group * c.rows_per_item, tile_index * c.tile};
}
REFIT_HOST_DEVICE Slot slot_of(const DeviceCopy& c, const ItemPlace& p, int thread, int j) {
  const int lane = thread & ((1 << c.lanes_log2) - 1);
  const std::int64_t rows_per_pass = kCopyThreads >> c.lanes_log2;
  const int along = j & ((1 << c.col_passes_log2) - 1);
  return {p.row + (j >> c.col_passes_log2) * rows_per_pass + (thread >> c.lanes_log2),
          p.tile + lane + (static_cast<std::int64_t>(along) << c.lanes_log2)};
}

// The part of row `row` the copy moves: [lo, hi) in the row's measure.
REFIT_HOST_DEVICE std::int64_t row_lo(const DeviceCopy& c, std::int64_t row) {
  return row == c.first_row ? c.first_lo : 0;
}
REFIT_HOST_DEVICE std::int64_t row_hi(const DeviceCopy& c, std::int64_t row) {
  return row == c.last_row ? c.last_hi : c.row_length;
}

// Slot j of a kBytes item: its 16-byte word read into `word`; returns where it goes (0: nowhere;
// a partial word is moved here and now, byte by byte). `rows` gives a row's RowStart.
template <class Rows>
REFIT_HOST_DEVICE std::uintptr_t load_word_slot(const DeviceCopy& c, const ItemPlace& p, int thread, int j,
                                                Rows rows, Word16& word) {
  const Slot s = slot_of(c, p, thread, j);
  if (s.row > c.last_row) return 0;
  const RowStart r = rows(s.row);
  const std::uintptr_t dst_lo = r.dst + static_cast<std::uintptr_t>(row_lo(c, s.row));
  const std::uintptr_t dst_hi = r.dst + static_cast<std::uintptr_t>(row_hi(c, s.row));
  const std::uintptr_t to = (dst_lo & ~std::uintptr_t{15}) + 16 * static_cast<std::uintptr_t>(s.at);
  if (to >= dst_hi) return 0;
  const std::uintptr_t shift = r.src - r.dst;  // source byte of destination byte x: x + shift
  if (to < dst_lo || to + 16 > dst_hi) {       // the run's partial first or last word
    const std::uintptr_t end = to + 16 < dst_hi ? to + 16 : dst_hi;
    for (std::uintptr_t x = to < dst_lo ? dst_lo : to; x < end; ++x)
      *reinterpret_cast<std::uint8_t*>(x) = *reinterpret_cast<const std::uint8_t*>(x + shift);
    return 0;
  }
  const std::uintptr_t from = to + shift;
  const std::uintptr_t aligned = from & ~std::uintptr_t{15};
  if (aligned == from) {
    word = load_word(from);
  } else {
    const std::uintptr_t src_lo = dst_lo + shift;
    const std::uintptr_t src_hi = dst_hi + shift;
    word = shift_bytes(load_word_within(aligned, src_lo, src_hi),
                       load_word_within(aligned + 16, src_lo, src_hi), static_cast<int>(from - aligned));
  }
  return to;
}

// Slot j of a kElements item moving `Unit`s, as load_word_slot.
template <class Unit, class Rows>
REFIT_HOST_DEVICE std::uintptr_t load_unit_slot(const DeviceCopy& c, const ItemPlace& p, int thread, int j,
                                                Rows rows, Unit& unit) {
  const Slot s = slot_of(c, p, thread, j);
  if (s.row > c.last_row) return 0;
  const std::int64_t col = row_lo(c, s.row) + s.at;
  if (col >= row_hi(c, s.row)) return 0;
  const RowStart r = rows(s.row);
  unit = load_unit<Unit>(r.src + static_cast<std::uintptr_t>(col * c.src_stride[c.dims - 1]));
  return r.dst + static_cast<std::uintptr_t>(col * c.dst_stride[c.dims - 1]);
}

REFIT_HOST_DEVICE void store_value(std::uintptr_t at, const Word16& v) { store_word(at, v); }
template <class Unit>
REFIT_HOST_DEVICE void store_value(std::uintptr_t at, Unit v) {
  store_unit(at, v);
}

// The common case: every slot loaded into registers, then every one stored, so that the loads
// are in flight together. `load(j, value)` is a load_*_slot.
template <class Value, class Load>
REFIT_HOST_DEVICE void move_slots_together(Load load) {
  Value held[kCopySlots];
  std::uintptr_t to[kCopySlots];
  REFIT_UNROLL
  for (int j = 0; j < kCopySlots; ++j) to[j] = load(j, held[j]);
  REFIT_UNROLL
  for (int j = 0; j < kCopySlots; ++j)
    if (to[j] != 0) store_value(to[j], held[j]);
}

// Rows of many dims or beyond 2^32: slot by slot, no registers held (rare, kept small).
template <class Value, class Load>
REFIT_HOST_DEVICE void move_slots_one_by_one(Load load) {
  for (int j = 0; j < kCopySlots; ++j) {
    Value v{};
    if (const std::uintptr_t to = load(j, v); to != 0) store_value(to, v);
  }
}

template <class Value, bool kSmallRows>
REFIT_HOST_DEVICE void copy_item_as(const DeviceCopy& c, std::int64_t item, int thread) {
  const ItemPlace place = item_place(c, item);
  const auto rows = [&c](std::int64_t row) {
    return kSmallRows ? row_start_small(c, row) : row_start_any(c, row);
  };
  const auto load = [&](int j, Value& v) {
    if constexpr (sizeof(Value) == 16)
      return load_word_slot(c, place, thread, j, rows, v);
    else
      return load_unit_slot(c, place, thread, j, rows, v);
  };
  if constexpr (kSmallRows)
    move_slots_together<Value>(load);
  else
    move_slots_one_by_one<Value>(load);
}

template <bool kSmallRows>
REFIT_HOST_DEVICE void copy_item_by_unit(const DeviceCopy& c, std::int64_t item, int thread) {
  if (c.mode == CopyMode::kBytes) return copy_item_as<Word16, kSmallRows>(c, item, thread);
  switch (c.unit) {
    case 1:
      return copy_item_as<std::uint8_t, kSmallRows>(c, item, thread);
    case 2:
      return copy_item_as<std::uint16_t, kSmallRows>(c, item, thread);
    case 4:
      return copy_item_as<std::uint32_t, kSmallRows>(c, item, thread);
    default:
      return copy_item_as<unsigned long long, kSmallRows>(c, item, thread);
  }
}

REFIT_HOST_DEVICE_OUTLINED void copy_item_any(const DeviceCopy& c, std::int64_t item, int thread) {
  copy_item_by_unit<false>(c, item, thread);
}

// One thread's share of item `item` (counted from the copy's own first item).
REFIT_HOST_DEVICE void copy_item(const DeviceCopy& c, std::int64_t item, int thread) {
  if (small_rows(c)) return copy_item_by_unit<true>(c, item, thread);
  copy_item_any(c, item, thread);
}

// The copy of a batch that owns batch-wide item `item` (copies ordered by item_begin).
REFIT_HOST_DEVICE int find_copy(const DeviceCopy* copies, int n, std::int64_t item) {
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
