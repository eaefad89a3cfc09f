#include "refit/lowering/arrays.h"

namespace refit::lowering {
namespace {

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

Shape point_at(const Box& box, std::int64_t index) {
  Shape p = box.offset;
  for (std::size_t d = box.rank(); d-- > 0;) {
    p[d] += index % box.extent[d];
    index /= box.extent[d];
  }
  return p;
}

void range_boxes(const Box& box, std::int64_t first, std::int64_t end, std::vector<Box>& out) {
  if (first < end) cover(box, 0, first, end, out);
}

Walk::Walk(const Array& array, const Box& x, std::int64_t element_size)
    : arrays_(1), element_size_(element_size) {
  add_dims(x, {&array, nullptr});
}

Walk::Walk(const Array& from, const Array& to, const Box& x, std::int64_t element_size)
    : arrays_(2), element_size_(element_size) {
  add_dims(x, {&from, &to});
}

void Walk::add_dims(const Box& x, const std::array<const Array*, 2>& arrays) {
  std::array<std::array<std::int64_t, kMaxTensorDims>, 2> strides{};
  for (int a = 0; a < arrays_; ++a) {
    const Array& array = *arrays[static_cast<std::size_t>(a)];
    const Box& box = *array.box;
    auto& s = strides[static_cast<std::size_t>(a)];
    std::int64_t index = 0;
    if (array.strides != nullptr) {
      std::ranges::copy(*array.strides, s.begin());
    } else {
      s[box.rank() - 1] = 1;
      for (std::size_t d = box.rank() - 1; d-- > 0;) s[d] = s[d + 1] * box.extent[d + 1];
    }
    for (std::size_t d = 0; d < x.rank(); ++d) index += (x.offset[d] - box.offset[d]) * s[d];
    origin_[static_cast<std::size_t>(a)] = array.offset + index * element_size_;
  }
  for (std::size_t d = 0; d < x.rank(); ++d) {
    if (x.extent[d] == 1) continue;
    bool merge = dims_ > 0;
    for (int a = 0; merge && a < arrays_; ++a)
      merge = stride(a, dims_ - 1) == x.extent[d] * strides[static_cast<std::size_t>(a)][d];
    if (!merge) ++dims_;
    const auto at = static_cast<std::size_t>(dims_ - 1);
    extent_[at] = merge ? extent_[at] * x.extent[d] : x.extent[d];
    for (int a = 0; a < arrays_; ++a)
      stride_[static_cast<std::size_t>(a)][at] = strides[static_cast<std::size_t>(a)][d];
  }
  if (dims_ == 0) {
    dims_ = 1;
    extent_[0] = 1;
    for (int a = 0; a < arrays_; ++a) stride_[static_cast<std::size_t>(a)][0] = 1;
  }
  bool contiguous = true;
  for (int a = 0; a < arrays_; ++a) contiguous = contiguous && stride(a, dims_ - 1) == 1;
  run_elements_ = contiguous ? extent(dims_ - 1) : 1;
}

std::int64_t Walk::offset_of(int a, std::int64_t index) const {
  std::int64_t offset = 0;
  for (int d = dims_ - 1; d >= 0; --d) {
    offset += (index % extent(d)) * stride(a, d);
    index /= extent(d);
  }
  return origin_[static_cast<std::size_t>(a)] + offset * element_size_;
}

std::int64_t Walk::runs(std::int64_t first, std::int64_t count) const {
  if (count <= 0) return 0;
  return (first + count - 1) / run_elements_ - first / run_elements_ + 1;
}

}  // namespace refit::lowering
