#pragma once
// Boxes stored row-major in buffers: where an element range of a box lies in one or two arrays,
// and the contiguous runs it forms there. The lowering counts runs with these, and every
// executor packs, unpacks and sends in place through them, so what is decided is what runs.
// Element ranges are always row-major indices inside a box.
#include <algorithm>
#include <array>
#include <cstdint>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/tensor_spec.h"

namespace refit::lowering {

// An array holding `*box`, its first element `offset` bytes into some buffer: row-major and
// contiguous, or with the given strides (a region of a framework parameter, see Region). Box and
// strides are borrowed: they live in the plan (a segment's box) or in a rank's shards.
struct Array {
  std::int64_t offset = 0;
  const Box* box = nullptr;
  const Shape* strides = nullptr;  // elements between neighbours along each dim; null: row-major
};

// Row-major index of `point` inside `box`, and the point of a row-major index.
std::int64_t row_major_index(const Box& box, const Shape& point);
Shape point_at(const Box& box, std::int64_t index);

// Boxes (at most 2 * dims - 1) that cover exactly elements [first, end) of `box`.
void range_boxes(const Box& box, std::int64_t first, std::int64_t end, std::vector<Box>& out);

// A box `x` walked over the one or two arrays that hold it: dims of extent 1 dropped, and a dim
// merged into the one outside it where the two are contiguous in every array. Row-major order of
// x's elements is unchanged, so element ranges keep their meaning.
class Walk {
 public:
  // Preconditions: x lies inside every array's box; all have the same number of dims (1..8);
  // strided arrays have one stride per dim.
  Walk(const Array& array, const Box& x, std::int64_t element_size);
  Walk(const Array& from, const Array& to, const Box& x, std::int64_t element_size);

  int arrays() const { return arrays_; }
  int dims() const { return dims_; }
  std::int64_t extent(int d) const { return extent_[static_cast<std::size_t>(d)]; }
  // Elements between neighbours along walk dim d in array a.
  std::int64_t stride(int a, int d) const {
    return stride_[static_cast<std::size_t>(a)][static_cast<std::size_t>(d)];
  }
  std::int64_t element_size() const { return element_size_; }

  // Byte offset, in the buffer of array a, of element `index` of x.
  std::int64_t offset_of(int a, std::int64_t index) const;
  // Elements in one run: the inner walk dim when it is contiguous in every array, else 1.
  // How many runs, contiguous in every array at once, elements [first, first + count) form.
  std::int64_t runs(std::int64_t first, std::int64_t count) const;
  // Calls f(index, elements) for each of those runs in order: elements [index, index + elements).
  template <class F>
  void for_each_run(std::int64_t first, std::int64_t count, F&& f) const;

 private:
  void add_dims(const Box& x, const std::array<const Array*, 2>& arrays);

  int arrays_ = 1;
  int dims_ = 0;
  std::int64_t element_size_ = 1;
  std::int64_t run_elements_ = 1;
  std::array<std::int64_t, kMaxTensorDims> extent_{};
  std::array<std::array<std::int64_t, kMaxTensorDims>, 2> stride_{};
  std::array<std::int64_t, 2> origin_{};  // bytes: x's first element in each array's buffer
};

template <class F>
void Walk::for_each_run(std::int64_t first, std::int64_t count, F&& f) const {
  const std::int64_t end = first + count;
  for (std::int64_t at = first; at < end;) {
    const std::int64_t next = std::min(end, (at / run_elements_ + 1) * run_elements_);
    f(at, next - at);
    at = next;
  }
}

}  // namespace refit::lowering
