#include "refit/core/box.h"

#include <algorithm>

#include <fmt/format.h>

namespace refit {

std::int64_t element_count(const Shape& shape) {
  std::int64_t n = 1;
  for (auto s : shape) n *= s;
  return n;
}

Shape row_major_strides(const Shape& extent) {
  Shape strides(extent.size(), 1);
  for (std::size_t d = extent.size(); d-- > 1;) strides[d - 1] = strides[d] * extent[d];
  return strides;
}

std::int64_t Box::volume() const { return element_count(extent); }

bool Box::empty() const {
  return std::ranges::any_of(extent, [](std::int64_t e) { return e == 0; });
}

bool Box::contains(const Box& inner) const {
  if (inner.rank() != rank()) return inner.empty();
  for (std::size_t d = 0; d < rank(); ++d)
    if (inner.offset[d] < offset[d] || inner.offset[d] + inner.extent[d] > offset[d] + extent[d])
      return inner.empty();
  return true;
}

bool Box::contains_point(const Shape& point) const {
  if (point.size() != rank()) return false;
  for (std::size_t d = 0; d < rank(); ++d)
    if (point[d] < offset[d] || point[d] >= offset[d] + extent[d]) return false;
  return true;
}

std::string Box::to_string() const {
  std::string out = "[";
  for (std::size_t d = 0; d < rank(); ++d)
    out += fmt::format("{}{}:{}", d ? ", " : "", offset[d], offset[d] + extent[d]);
  return out + "]";
}

Box Box::whole(const Shape& shape) { return Box{Shape(shape.size(), 0), shape}; }

bool overlap(const Box& a, const Box& b) {
  if (a.rank() != b.rank()) return false;
  for (std::size_t d = 0; d < a.rank(); ++d)
    if (std::min(a.offset[d] + a.extent[d], b.offset[d] + b.extent[d]) <= std::max(a.offset[d], b.offset[d]))
      return false;
  return true;
}

std::optional<Box> intersect(const Box& a, const Box& b) {
  // Most pairs a caller tries are disjoint: find out before allocating the result.
  if (!overlap(a, b)) return std::nullopt;
  Box out{Shape(a.rank()), Shape(a.rank())};
  for (std::size_t d = 0; d < a.rank(); ++d) {
    const auto lo = std::max(a.offset[d], b.offset[d]);
    out.offset[d] = lo;
    out.extent[d] = std::min(a.offset[d] + a.extent[d], b.offset[d] + b.extent[d]) - lo;
  }
  return out;
}

}  // namespace refit
