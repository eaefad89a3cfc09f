#include "refit/core/layout.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"

namespace refit {

namespace {

// Part `index` of `length` cut into parts of `chunk` (> 0 unless length is 0) from `start` (<= 0):
// [start + index*chunk, start + (index+1)*chunk) clipped to [0, length). Parts past the end are
// empty at `length`, parts before the beginning empty at 0.
Interval part_of(std::int64_t length, std::int64_t chunk, std::int64_t start, std::int64_t index) {
  if (chunk == 0) return Interval{0, 0};  // length 0
  // Before ceil((length - start) / chunk), index * chunk < length - start, so neither end of the
  // part can overflow (Layout::make bounds -start by the element cap).
  if (index >= ceil_div(length - start, chunk)) return Interval{length, 0};
  const std::int64_t begin = start + index * chunk;
  if (begin >= 0) return Interval{begin, std::min(chunk, length - begin)};
  const std::int64_t end = std::min(begin + chunk, length);  // begin < 0: no overflow
  return end <= 0 ? Interval{0, 0} : Interval{0, end};
}

// The largest part of one split of `length` into `parts`: torch.chunk's first; with a chunk, the
// first non-empty part, the one after it or the last (those between are whole chunks).
std::int64_t largest_part(const Placement& split, std::int64_t length, std::int64_t parts) {
  if (split.chunk == 0 || length == 0) return part_interval(split, length, parts, 0).extent;
  const std::int64_t first = std::min(parts - 1, -split.start / split.chunk);
  std::int64_t largest = 0;
  for (const auto i : {first, std::min(first + 1, parts - 1), parts - 1})
    largest = std::max(largest, part_interval(split, length, parts, i).extent);
  return largest;
}

// The largest extent of dim `dim` a split on mesh axis `axis` can be given: what the splits of the
// axes before it leave at most.
std::int64_t largest_extent_before(const Shape& shape, const Mesh& mesh,
                                   const std::vector<Placement>& placements, std::size_t axis) {
  const auto dim = static_cast<std::size_t>(placements[axis].dim);
  std::int64_t extent = shape[dim];
  for (std::size_t a = 0; a < axis; ++a)
    if (placements[a].is_shard() && placements[a].dim == placements[axis].dim)
      extent = largest_part(placements[a], extent, mesh.shape()[a]);
  return extent;
}

}  // namespace

Interval chunk_interval(std::int64_t length, std::int64_t parts, std::int64_t index) {
  return part_of(length, ceil_div(length, parts), 0, index);
}

Interval part_interval(const Placement& split, std::int64_t length, std::int64_t parts, std::int64_t index) {
  if (split.chunk == 0) return chunk_interval(length, parts, index);
  return part_of(length, length == 0 ? 0 : split.chunk, split.start, index);
}

Result<Layout> Layout::make(Shape tensor_shape, Mesh mesh, std::vector<Placement> placements) {
  if (tensor_shape.empty()) return invalid("shape has no dims");
  for (std::size_t d = 0; d < tensor_shape.size(); ++d)
    if (tensor_shape[d] < 0)
      return out_of_range(fmt::format("shape[{}] is {}, must be >= 0", d, tensor_shape[d]));
  REFIT_TRY_IN(checked_product(tensor_shape, limits::kMaxElements, "elements"), "shape");
  // Each size within the cap even beside a 0 (an empty tensor): splits compute offsets from it.
  for (std::size_t d = 0; d < tensor_shape.size(); ++d)
    if (tensor_shape[d] > limits::kMaxElements)
      return out_of_range(fmt::format("shape[{}] is {}, above the {} elements a tensor may have", d,
                                      tensor_shape[d], limits::kMaxElements));
  if (placements.size() != mesh.ndim())
    return mismatch(
        fmt::format("placements: {} given for a mesh of {} axes", placements.size(), mesh.ndim()));
  for (std::size_t a = 0; a < placements.size(); ++a) {
    const auto& p = placements[a];
    if (p.is_shard() && (p.dim < 0 || static_cast<std::size_t>(p.dim) >= tensor_shape.size()))
      return out_of_range(fmt::format("placements[{}]: S{} is out of range for a tensor of {} dims", a, p.dim,
                                      tensor_shape.size()));
    if (p.is_shard() && p.chunk < 0)
      return out_of_range(fmt::format("placements[{}]: chunk {} is negative", a, p.chunk));
    if (p.is_shard() && (p.start > 0 || p.start < -limits::kMaxElements || (p.start != 0 && p.chunk == 0)))
      return out_of_range(
          fmt::format("placements[{}]: start {} must lie in [-2^48, 0], with a chunk", a, p.start));
  }
  for (std::size_t a = 0; a < placements.size(); ++a) {
    const auto& p = placements[a];
    if (!p.is_shard() || p.chunk == 0) continue;
    const std::int64_t extent = largest_extent_before(tensor_shape, mesh, placements, a);
    if (p.chunk < ceil_div(extent - p.start, mesh.shape()[a]))
      return out_of_range(fmt::format(
          "placements[{}]: {} parts of {} from {} leave some of the {} elements of dim {} in no part", a,
          mesh.shape()[a], p.chunk, p.start, extent, p.dim));
  }
  return Layout(std::move(tensor_shape), std::move(mesh), std::move(placements));
}

Box Layout::box_at_position(std::int64_t position) const {
  Box box = Box::whole(shape_);
  const auto coord = mesh_.coord_of_position(position);
  // Mesh axes apply in order; each splits the local extent the previous axes left.
  for (std::size_t a = 0; a < placements_.size(); ++a) {
    if (!placements_[a].is_shard()) continue;
    const auto d = static_cast<std::size_t>(placements_[a].dim);
    const auto part = part_interval(placements_[a], box.extent[d], mesh_.shape()[a], coord[a]);
    box.offset[d] += part.offset;
    box.extent[d] = part.extent;
  }
  // An empty shard starts at its dim's global size, wherever the axes before left it: PyTorch's
  // compute_local_shape_and_global_offset says so (tests/core/dtensor_conformance_test.cc).
  for (std::size_t d = 0; d < box.rank(); ++d)
    if (box.extent[d] == 0) box.offset[d] = shape_[d];
  return box;
}

Result<Box> Layout::local_box(Rank r) const {
  const auto position = mesh_.position_of_rank(r);
  if (!position) return not_found(fmt::format("rank {} is not in the mesh", r.value));
  return box_at_position(*position);
}

}  // namespace refit
