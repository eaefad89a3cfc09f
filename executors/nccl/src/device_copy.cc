#include "device_copy.h"

#include <bit>

namespace refit::nccl_detail {
namespace {

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

// Re-expresses the copy in units of `w` bytes: the inner dim becomes es*inner/w units.
void regroup(DeviceCopy& c, const CopyGeometry& g, std::int32_t w) {
  const std::int64_t es = g.element_size;
  const int in = g.dims - 1;
  const std::int64_t inner = g.extent[in];
  const std::int64_t per_row = es * inner / w;
  c.unit = w;
  c.extent[in] = per_row;
  for (int d = 0; d < in; ++d) {
    c.src_stride[d] = es * g.src_stride[d] / w;
    c.dst_stride[d] = es * g.dst_stride[d] / w;
  }
  const auto to_units = [&](std::int64_t e) { return (e / inner) * per_row + (e % inner) * es / w; };
  c.first = to_units(g.first);
  c.count = to_units(g.first + g.count) - c.first;
}

// Short rows share an item (one thread per unit), long rows are cut into tiles of
// kCopyThreads * kCopyUnroll units.
void plan_threads(DeviceCopy& c) {
  const std::int64_t inner = c.extent[c.dims - 1];
  c.lanes = inner >= kCopyThreads
                ? kCopyThreads
                : static_cast<std::int32_t>(std::bit_ceil(static_cast<std::uint64_t>(inner)));
  c.rows_per_item = kCopyThreads / c.lanes;
  c.tile = c.lanes == kCopyThreads ? std::int64_t{kCopyThreads} * kCopyUnroll : c.lanes;
  c.tiles_per_row = (inner + c.tile - 1) / c.tile;
  if (c.count <= 0) {
    c.items = 0;
    return;
  }
  const std::int64_t rows = (c.first + c.count - 1) / inner - c.first / inner + 1;
  c.items = (rows + c.rows_per_item - 1) / c.rows_per_item * c.tiles_per_row;
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
  c.unit = g.element_size;
  for (int d = 0; d < g.dims; ++d) {
    c.extent[d] = g.extent[d];
    c.src_stride[d] = g.src_stride[d];
    c.dst_stride[d] = g.dst_stride[d];
  }
  c.first = g.first;
  c.count = g.count;
  const int in = g.dims - 1;
  if (g.src_stride[in] == 1 && g.dst_stride[in] == 1)
    regroup(c, g,
            widest_unit(g, reinterpret_cast<std::uintptr_t>(src), reinterpret_cast<std::uintptr_t>(dst)));
  plan_threads(c);
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
