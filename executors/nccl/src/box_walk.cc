#include "box_walk.h"

namespace refit::nccl_detail {
namespace {

Shape strides_of(const Box& array) {
  Shape s(array.rank(), 1);
  for (std::size_t d = array.rank(); d-- > 1;) s[d - 1] = s[d] * array.extent[d];
  return s;
}

std::int64_t origin_of(const Stored& a, const Shape& strides, const Box& x, std::int64_t es) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d < x.rank(); ++d) index += (x.offset[d] - a.box.offset[d]) * strides[d];
  return a.offset + index * es;
}

// The dims of `x` as a walk over one or two arrays: dims of extent 1 dropped, and a dim merged
// into the one outside it when it is contiguous with it in every array. Row-major order of the
// elements is unchanged, so element ranges keep their meaning.
struct Walk {
  int dims = 0;
  std::int64_t extent[kMaxCopyDims] = {};
  std::int64_t stride[2][kMaxCopyDims] = {};
};

Walk walk_of(const Box& x, const Shape* const strides[], int sides) {
  Walk w;
  for (std::size_t d = 0; d < x.rank(); ++d) {
    if (x.extent[d] == 1) continue;
    bool merge = w.dims > 0;
    for (int s = 0; merge && s < sides; ++s)
      merge = w.stride[s][w.dims - 1] == x.extent[d] * (*strides[s])[d];
    if (!merge) ++w.dims;
    const int at = w.dims - 1;
    w.extent[at] = merge ? w.extent[at] * x.extent[d] : x.extent[d];
    for (int s = 0; s < sides; ++s) w.stride[s][at] = (*strides[s])[d];
  }
  if (w.dims == 0) {
    w.dims = 1;
    w.extent[0] = 1;
    for (int s = 0; s < sides; ++s) w.stride[s][0] = 1;
  }
  return w;
}

// Appends boxes covering elements [first, end) of `b`, where dims before `d` are pinned to one.
void cover(const Box& b, std::size_t d, std::int64_t first, std::int64_t end, std::vector<Box>& out) {
  std::int64_t inner = 1;
  for (std::size_t k = d + 1; k < b.rank(); ++k) inner *= b.extent[k];
  const auto rows = [&](std::int64_t from, std::int64_t to) {
    Box r = b;
    r.offset[d] += from;
    r.extent[d] = to - from;
    return r;
  };
  const std::int64_t r0 = first / inner;
  const std::int64_t r1 = (end - 1) / inner;
  if (r0 == r1 && (first % inner != 0 || end % inner != 0)) {
    cover(rows(r0, r0 + 1), d + 1, first - r0 * inner, end - r0 * inner, out);
    return;
  }
  std::int64_t full_begin = r0;
  std::int64_t full_end = r1 + 1;
  if (first % inner != 0) {
    cover(rows(r0, r0 + 1), d + 1, first - r0 * inner, inner, out);
    full_begin = r0 + 1;
  }
  if (end % inner != 0) full_end = r1;
  if (full_begin < full_end) out.push_back(rows(full_begin, full_end));
  if (end % inner != 0) cover(rows(r1, r1 + 1), d + 1, 0, end - r1 * inner, out);
}

}  // namespace

std::int64_t row_major_index(const Box& box, const Shape& point) {
  std::int64_t index = 0;
  for (std::size_t d = 0; d < box.rank(); ++d) index = index * box.extent[d] + (point[d] - box.offset[d]);
  return index;
}

void range_boxes(const Box& box, std::int64_t first, std::int64_t end, std::vector<Box>& out) {
  if (first < end) cover(box, 0, first, end, out);
}

PlannedCopy plan_copy(const Stored& src, const Stored& dst, const Box& x, std::int64_t first,
                      std::int64_t count, std::int64_t element_size) {
  const Shape ss = strides_of(src.box);
  const Shape ds = strides_of(dst.box);
  const Shape* const strides[] = {&ss, &ds};
  const Walk w = walk_of(x, strides, 2);
  PlannedCopy p;
  p.src_offset = origin_of(src, ss, x, element_size);
  p.dst_offset = origin_of(dst, ds, x, element_size);
  auto& g = p.geometry;
  g.dims = w.dims;
  g.element_size = static_cast<std::int32_t>(element_size);
  for (int d = 0; d < w.dims; ++d) {
    g.extent[d] = w.extent[d];
    g.src_stride[d] = w.stride[0][d];
    g.dst_stride[d] = w.stride[1][d];
  }
  g.first = first;
  g.count = count;
  return p;
}

std::optional<std::int64_t> contiguous_run(const Stored& array, const Box& x, std::int64_t first,
                                           std::int64_t count, std::int64_t element_size) {
  const Shape s = strides_of(array.box);
  const Shape* const strides[] = {&s};
  const Walk w = walk_of(x, strides, 1);
  const std::int64_t inner = w.extent[w.dims - 1];
  if (count > 1 && (w.stride[0][w.dims - 1] != 1 || first / inner != (first + count - 1) / inner))
    return std::nullopt;
  std::int64_t offset = 0;
  std::int64_t index = first;
  for (int d = w.dims - 1; d >= 0; --d) {
    offset += (index % w.extent[d]) * w.stride[0][d];
    index /= w.extent[d];
  }
  return origin_of(array, s, x, element_size) + offset * element_size;
}

}  // namespace refit::nccl_detail
