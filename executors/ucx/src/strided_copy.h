#pragma once
// A segment travels packed: its box's elements row-major, back to back inside the message. At
// either end it lives in a larger row-major buffer. RowMap relates the two for one clip of the
// segment, row by row, so packing, unpacking and listing the contiguous runs for zero-copy puts
// walk the same rows, and any byte range of a segment maps (a chunk may end mid-row, or even
// mid-element when dtypes of different sizes share a message).
#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/tensor_spec.h"

namespace refit::ucx_detail {

// A row-major buffer holding `box`, starting `offset` bytes into registered region `region`.
struct View {
  std::uint32_t region = 0;
  std::int64_t offset = 0;
  Box box;
  std::int64_t element_size = 1;
};

// A contiguous piece of packed bytes and where it lies in a region.
struct Run {
  std::int64_t stream = 0;  // offset in the packed bytes it belongs to
  std::uint32_t region = 0;
  std::int64_t offset = 0;  // offset in the region
  std::int64_t length = 0;
  bool operator==(const Run&) const = default;
};

class RowMap {
 public:
  // Preconditions: `clip` lies inside both `segment` and `view.box`; all three have one rank.
  RowMap(const Box& segment, const View& view, const Box& clip);

  bool covers_segment() const { return covers_; }
  std::uint32_t region() const { return region_; }

  // Calls f(Run) for each contiguous piece of the clip whose packed bytes lie in [begin, end),
  // offsets relative to the segment's first packed byte, in packed order.
  template <class F>
  void for_each_run(std::int64_t begin, std::int64_t end, F&& f) const;

 private:
  // Rows are the segment cut along its outer dims; dims after the split are contiguous on both
  // sides, so a row's clipped part is one run.
  struct OuterDim {
    std::int64_t extent = 0;      // of the segment
    std::int64_t clip_begin = 0;  // clip range, relative to the segment's offset
    std::int64_t clip_end = 0;
    std::int64_t stride = 0;  // bytes between neighbours in the view
  };
  bool inside(const std::array<std::int64_t, kMaxTensorDims>& x) const;
  std::int64_t address(const std::array<std::int64_t, kMaxTensorDims>& x) const;
  void advance(std::array<std::int64_t, kMaxTensorDims>& x) const;

  std::vector<OuterDim> outer_;
  std::int64_t row_bytes_ = 0;
  std::int64_t clip_begin_ = 0;  // byte range of each row that lies in the clip
  std::int64_t clip_end_ = 0;
  std::int64_t origin_ = 0;  // region offset of the clip's first byte
  std::uint32_t region_ = 0;
  bool covers_ = false;
};

template <class F>
void RowMap::for_each_run(std::int64_t begin, std::int64_t end, F&& f) const {
  if (begin >= end) return;
  std::array<std::int64_t, kMaxTensorDims> x{};
  std::int64_t row = begin / row_bytes_;
  for (std::size_t d = outer_.size(), rest = static_cast<std::size_t>(row); d-- > 0;) {
    x[d] = static_cast<std::int64_t>(rest) % outer_[d].extent;
    rest /= static_cast<std::size_t>(outer_[d].extent);
  }
  for (; row * row_bytes_ < end; ++row, advance(x)) {
    if (!inside(x)) continue;
    const std::int64_t start = row * row_bytes_;
    const std::int64_t lo = std::max(begin, start + clip_begin_);
    const std::int64_t hi = std::min(end, start + clip_end_);
    if (lo < hi) f(Run{lo, region_, address(x) + (lo - start - clip_begin_), hi - lo});
  }
}

// Copies the clip's packed bytes [begin, end) of a segment between `packed` (whose first byte is
// the segment's byte `begin`) and the regions (base address per region id).
void pack(const RowMap& map, std::int64_t begin, std::int64_t end, std::span<std::byte* const> regions,
          std::byte* packed);
void unpack(const RowMap& map, std::int64_t begin, std::int64_t end, const std::byte* packed,
            std::span<std::byte* const> regions);

}  // namespace refit::ucx_detail
