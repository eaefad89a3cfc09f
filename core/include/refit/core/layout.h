#pragma once
// How one tensor is spread over a mesh of ranks, with PyTorch DTensor's default semantics.
#include <vector>

#include "refit/core/box.h"
#include "refit/core/error.h"
#include "refit/core/mesh.h"
#include "refit/core/placement.h"

namespace refit {

class Layout {
 public:
  // Checks one placement per mesh axis and every Shard dim inside the tensor's dims.
  [[nodiscard]] static Result<Layout> make(Shape tensor_shape, Mesh mesh, std::vector<Placement> placements);

  const Shape& tensor_shape() const { return shape_; }
  const Mesh& mesh() const { return mesh_; }
  const std::vector<Placement>& placements() const { return placements_; }

  // The box held by the rank at a mesh position (row-major index).
  Box box_at_position(std::int64_t position) const;
  // The box held by a global rank, or an error when the rank is not in the mesh.
  [[nodiscard]] Result<Box> local_box(Rank r) const;

  bool operator==(const Layout&) const = default;

 private:
  Layout(Shape shape, Mesh mesh, std::vector<Placement> placements)
      : shape_(std::move(shape)), mesh_(std::move(mesh)), placements_(std::move(placements)) {}
  Shape shape_;
  Mesh mesh_;
  std::vector<Placement> placements_;
};

// torch.chunk semantics for one split: chunk = ceil(L/n); part i starts at min(i*chunk, L)
// and spans max(0, min((i+1)*chunk, L) - i*chunk).
struct Interval {
  std::int64_t offset = 0;
  std::int64_t extent = 0;
  bool operator==(const Interval&) const = default;
};
Interval chunk_interval(std::int64_t length, std::int64_t parts, std::int64_t index);
// Part `index` of `length` under one split: chunk_interval, or parts of the split's own chunk.
// Precondition: parts * split.chunk >= length (Layout::make checks it).
Interval part_interval(const Placement& split, std::int64_t length, std::int64_t parts, std::int64_t index);

[[nodiscard]] inline Result<Box> local_box(const Layout& layout, Rank r) { return layout.local_box(r); }

}  // namespace refit
