#include "strided_copy.h"

#include <cstring>

namespace refit::ucx_detail {

RowMap::RowMap(const Box& segment, const View& view, const Box& clip)
    : region_(view.region), covers_(clip == segment) {
  const std::size_t dims = segment.rank();
  std::vector<std::int64_t> stride(dims);
  stride[dims - 1] = view.element_size;
  for (std::size_t d = dims - 1; d-- > 0;) stride[d] = stride[d + 1] * view.box.extent[d + 1];
  // Split at the outermost dim after which every dim is whole in the segment, the clip and the
  // view alike: those inner dims are contiguous everywhere and travel as one row.
  const auto whole = [&](std::size_t d) {
    return segment.extent[d] == clip.extent[d] && clip.extent[d] == view.box.extent[d];
  };
  std::size_t split = dims - 1;
  while (split > 0 && whole(split)) --split;
  const std::int64_t inner = stride[split];
  row_bytes_ = segment.extent[split] * inner;
  clip_begin_ = (clip.offset[split] - segment.offset[split]) * inner;
  clip_end_ = clip_begin_ + clip.extent[split] * inner;
  origin_ = view.offset;
  for (std::size_t d = 0; d < dims; ++d) origin_ += (clip.offset[d] - view.box.offset[d]) * stride[d];
  for (std::size_t d = 0; d < split; ++d)
    outer_.push_back(OuterDim{segment.extent[d], clip.offset[d] - segment.offset[d],
                              clip.offset[d] - segment.offset[d] + clip.extent[d], stride[d]});
}

bool RowMap::inside(const std::array<std::int64_t, kMaxTensorDims>& x) const {
  for (std::size_t d = 0; d < outer_.size(); ++d)
    if (x[d] < outer_[d].clip_begin || x[d] >= outer_[d].clip_end) return false;
  return true;
}

std::int64_t RowMap::address(const std::array<std::int64_t, kMaxTensorDims>& x) const {
  std::int64_t at = origin_;
  for (std::size_t d = 0; d < outer_.size(); ++d) at += (x[d] - outer_[d].clip_begin) * outer_[d].stride;
  return at;
}

void RowMap::advance(std::array<std::int64_t, kMaxTensorDims>& x) const {
  for (std::size_t d = outer_.size(); d-- > 0;) {
    if (++x[d] < outer_[d].extent) return;
    x[d] = 0;
  }
}

void pack(const RowMap& map, std::int64_t begin, std::int64_t end, std::span<std::byte* const> regions,
          std::byte* packed) {
  map.for_each_run(begin, end, [&](const Run& r) {
    std::memcpy(packed + (r.stream - begin), regions[r.region] + r.offset,
                static_cast<std::size_t>(r.length));
  });
}

void unpack(const RowMap& map, std::int64_t begin, std::int64_t end, const std::byte* packed,
            std::span<std::byte* const> regions) {
  map.for_each_run(begin, end, [&](const Run& r) {
    std::memcpy(regions[r.region] + r.offset, packed + (r.stream - begin),
                static_cast<std::size_t>(r.length));
  });
}

}  // namespace refit::ucx_detail
