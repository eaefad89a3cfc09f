#pragma once
// An axis-aligned region of a tensor in global coordinates: offset and extent per dim.
#include <cstdint>
#include <optional>
#include <string>

#include "refit/core/shape.h"

namespace refit {

struct Box {
  Shape offset;
  Shape extent;

  std::size_t rank() const { return offset.size(); }
  std::int64_t volume() const;  // number of elements; 0 when any extent is 0
  bool empty() const;           // some extent is 0 (extents are never negative)
  // True when every element of `inner` lies in this box (an empty box is contained anywhere).
  bool contains(const Box& inner) const;
  bool contains_point(const Shape& point) const;
  bool operator==(const Box&) const = default;
  auto operator<=>(const Box&) const = default;
  std::string to_string() const;  // "[0:4, 2:7]"

  static Box whole(const Shape& shape);
};

// The common part of two boxes of the same rank, or nothing when they do not share an element.
std::optional<Box> intersect(const Box& a, const Box& b);
// Whether they share an element (intersect() without making the box).
bool overlap(const Box& a, const Box& b);

std::int64_t element_count(const Shape& shape);
// The strides, in elements, of an array of `extent` laid out row-major (the last dim's is 1).
Shape row_major_strides(const Shape& extent);

}  // namespace refit
