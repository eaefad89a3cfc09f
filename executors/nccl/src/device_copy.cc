#include "device_copy.h"

#include <bit>

#include "refit/core/tensor_spec.h"

namespace refit::nccl_detail {
namespace {

static_assert(kMaxCopyDims == static_cast<int>(kMaxTensorDims), "a copy holds a box of any tensor's dims");

// Offset, in elements, of element `index` (row-major in the box) through one array's strides.
std::int64_t offset_of(const CopyGeometry& g, const std::int64_t* stride, std::int64_t index) {
  std::int64_t offset = 0;
  for (int d = g.dims - 1; d >= 0; --d) {
    offset += (index % g.extent[d]) * stride[d];
    index /= g.extent[d];
  }
  return offset;
}

// The widest unit (16..1 bytes) dividing both addresses, every outer stride, the inner run and
// both ends of the range, all in bytes. Only called when the inner dim is contiguous on both sides.
std::int32_t widest_unit(const CopyGeometry& g, std::uintptr_t src, std::uintptr_t dst) {
  const std::int64_t es = g.element_size;
  const std::int64_t inner = g.extent[g.dims - 1];
  for (std::int64_t w = 16; w > 1; w /= 2) {
    bool ok = src % static_cast<std::uintptr_t>(w) == 0 && dst % static_cast<std::uintptr_t>(w) == 0 &&
              (es * inner) % w == 0 && (es * (g.first % inner)) % w == 0 &&
              (es * ((g.first + g.count) % inner)) % w == 0;
    for (int d = 0; ok && d + 1 < g.dims; ++d)
      ok = (es * g.src_stride[d]) % w == 0 && (es * g.dst_stride[d]) % w == 0;
    if (ok) return static_cast<std::int32_t>(w);
  }
  return 1;
}

// A misaligned contiguous row at least this long moves as bytes (16-byte stores, the partial end
// words byte by byte); a shorter one moves in the widest unit its alignment allows.
constexpr std::int64_t kMinByteRun = 64;

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
std::int32_t log2_of(std::int64_t power_of_two) {
  return std::countr_zero(static_cast<std::uint64_t>(power_of_two));
}

// Whether every row's part of the destination starts 16-byte aligned.
bool destination_rows_aligned(const CopyGeometry& g, std::uintptr_t dst) {
  const std::int64_t es = g.element_size;
  bool aligned = dst % 16 == 0 && (es * (g.first % g.extent[g.dims - 1])) % 16 == 0;
  for (int d = 0; d + 1 < g.dims; ++d) aligned = aligned && (es * g.dst_stride[d]) % 16 == 0;
  return aligned;
}

// How the threads share the work (copy_kernel_body.h). `measure(length)` is how many words or
// units a part of a row of `length` (in the row's measure) can take at most.
template <class Measure>
void plan_threads(DeviceCopy& c, Measure measure) {
  constexpr std::int64_t slots = kCopySlots;
  const std::int64_t rows = c.last_row - c.first_row + 1;
  const std::int64_t whole = measure(rows == 1 ? c.last_hi - c.first_lo : c.row_length);
  const std::int64_t lanes =
      whole >= kCopyThreads ? kCopyThreads
                            : static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(whole)));
  const auto col_passes = std::min(
      slots, static_cast<std::int64_t>(std::bit_ceil(static_cast<std::uint64_t>(ceil_div(whole, lanes)))));
  c.lanes_log2 = log2_of(lanes);
  c.col_passes_log2 = log2_of(col_passes);
  c.tile = lanes * col_passes;
  const std::int64_t tiles_per_row = ceil_div(whole, c.tile);
  c.by_tiles_per_row = make_divider(static_cast<std::uint64_t>(tiles_per_row));
  if (tiles_per_row == 1) {  // whole short rows per item
    c.rows_per_item = kCopyThreads / lanes * (slots / col_passes);
    c.rows_begin = c.first_row;
    c.items = ceil_div(rows, c.rows_per_item);
    return;
  }
  // Long rows: an item is a tile of one row (then lanes == kCopyThreads, col_passes == slots).
  c.rows_per_item = 1;
  c.first_tiles = ceil_div(measure(rows == 1 ? c.last_hi - c.first_lo : c.row_length - c.first_lo), c.tile);
  c.rows_begin = c.first_row + 1;
  c.items = rows == 1 ? c.first_tiles
                      : c.first_tiles + (rows - 2) * tiles_per_row + ceil_div(measure(c.last_hi), c.tile);
}

}  // namespace

PlannedCopy plan_copy(const lowering::Array& src, const lowering::Array& dst, const Box& x,
                      std::int64_t first, std::int64_t count, std::int64_t element_size) {
  const lowering::Walk w(src, dst, x, element_size);
  PlannedCopy p{.src_offset = w.offset_of(0, 0), .dst_offset = w.offset_of(1, 0)};
  auto& g = p.geometry;
  g.dims = w.dims();
  g.element_size = static_cast<std::int32_t>(element_size);
  for (int d = 0; d < w.dims(); ++d) {
    g.extent[d] = w.extent(d);
    g.src_stride[d] = w.stride(0, d);
    g.dst_stride[d] = w.stride(1, d);
  }
  g.first = first;
  g.count = count;
  return p;
}

CopyReach copy_reach(const CopyGeometry& g) {
  if (g.count <= 0) return {};
  const std::int64_t last = g.first + g.count - 1;
  const std::int64_t es = g.element_size;
  return CopyReach{.src_begin = offset_of(g, g.src_stride, g.first) * es,
                   .src_end = (offset_of(g, g.src_stride, last) + 1) * es,
                   .dst_begin = offset_of(g, g.dst_stride, g.first) * es,
                   .dst_end = (offset_of(g, g.dst_stride, last) + 1) * es};
}

DeviceCopy make_device_copy(const CopyGeometry& g, const std::byte* src, std::byte* dst) {
  DeviceCopy c;
  c.src = src;
  c.dst = dst;
  c.dims = g.dims;
  const std::int64_t es = g.element_size;
  for (int d = 0; d < g.dims; ++d) {
    c.src_stride[d] = es * g.src_stride[d];
    c.dst_stride[d] = es * g.dst_stride[d];
    if (d >= 1 && d + 1 < g.dims) c.by_extent[d] = make_divider(static_cast<std::uint64_t>(g.extent[d]));
  }
  if (g.count <= 0) return c;  // no items
  const int in = g.dims - 1;
  const std::int64_t inner = g.extent[in];
  c.first_row = g.first / inner;
  c.last_row = (g.first + g.count - 1) / inner;
  constexpr std::int64_t k2To32 = std::int64_t{1} << 32;
  c.rows_below_2_32 = c.last_row < k2To32;
  for (int d = 1; d + 1 < g.dims; ++d) c.rows_below_2_32 = c.rows_below_2_32 && g.extent[d] < k2To32;
  const std::int64_t lo = g.first % inner;
  const std::int64_t hi = (g.first + g.count - 1) % inner + 1;
  const auto s = reinterpret_cast<std::uintptr_t>(src);
  const auto d = reinterpret_cast<std::uintptr_t>(dst);
  const bool contiguous = g.src_stride[in] == 1 && g.dst_stride[in] == 1;
  const std::int32_t unit = contiguous ? widest_unit(g, s, d) : g.element_size;
  if (contiguous && (unit == 16 || es * inner >= kMinByteRun)) {
    c.mode = CopyMode::kBytes;
    c.unit = 16;
    c.row_length = es * inner;
    c.first_lo = es * lo;
    c.last_hi = es * hi;
    // A run of n bytes covers at most ceil((n + 15) / 16) aligned words, n / 16 where it starts aligned.
    const std::int64_t misalign = destination_rows_aligned(g, d) ? 0 : 15;
    plan_threads(c, [&](std::int64_t bytes) { return ceil_div(bytes + misalign, 16); });
    return c;
  }
  c.mode = CopyMode::kElements;
  c.unit = unit;
  c.row_length = es * inner / unit;
  c.first_lo = es * lo / unit;
  c.last_hi = es * hi / unit;
  if (contiguous) c.src_stride[in] = c.dst_stride[in] = unit;
  plan_threads(c, [](std::int64_t units) { return units; });
  return c;
}

std::int64_t number_items(std::span<DeviceCopy> batch) {
  std::int64_t total = 0;
  for (auto& c : batch) {
    c.item_begin = total;
    total += c.items;
  }
  return total;
}

void run_batch_on_host(std::span<const DeviceCopy> batch) {
  if (batch.empty()) return;
  const auto& last = batch.back();
  const std::int64_t total = last.item_begin + last.items;
  const int n = static_cast<int>(batch.size());
  for (std::int64_t item = 0; item < total; ++item) {
    const auto& c = batch[static_cast<std::size_t>(find_copy(batch.data(), n, item))];
    for (int thread = 0; thread < kCopyThreads; ++thread) copy_item(c, item - c.item_begin, thread);
  }
}

}  // namespace refit::nccl_detail
