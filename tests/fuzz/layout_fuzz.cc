// Fuzz target: the layout and overlap algebra. The bytes describe a tensor shape and two layouts
// of it (mesh shapes, placements: replicated, torch.chunk splits, named chunks with a start);
// when both are accepted, overlaps() must tile every
// destination shard exactly with pieces that lie inside their source shards:
//   sum over pieces of volume(piece) == volume(destination box), each piece inside both boxes.
#include <cstdlib>
#include <span>

#include "fuzz_input.h"
#include "refit/core/overlap.h"

namespace {

// Reads bytes from the front; zeros when they run out.
struct Bytes : refit::fuzz::ByteReader {
  std::int64_t next64() {
    std::uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v = v << 8 | next();
    return static_cast<std::int64_t>(v);
  }
  // Mostly small; sometimes any int64, so that the caps and the checked arithmetic are reached.
  std::int64_t size() {
    const auto b = next();
    return b >= 240 ? next64() : b % 24;
  }
};

refit::Result<refit::Layout> layout_of(Bytes& in, const refit::Shape& shape) {
  std::vector<std::int64_t> mesh(1 + in.next() % refit::kMaxMeshAxes);
  std::vector<refit::Placement> placements;
  for (auto& axis : mesh) {
    axis = in.next() % 9;  // 0 is refused
    const auto p = in.next();
    // Out-of-range dims, chunks that leave elements in no part and starts after the dim's
    // beginning are allowed through, to be refused; named chunks and shifted grids to be tiled.
    if (p % 3 == 0) {
      placements.push_back(refit::Placement::replicate());
    } else if (p % 3 == 1) {
      placements.push_back(refit::Placement::shard(p % 5));
    } else {
      const auto chunk = in.size();
      auto start = in.size();  // mostly negated: a start lies before the dim's beginning
      if (start > 0 && in.next() % 4 != 0) start = -start;
      placements.push_back(refit::Placement::shard(p % 5, chunk, start));
    }
  }
  auto m = refit::Mesh::make(std::move(mesh));
  if (!m) return std::unexpected(m.error());
  return refit::Layout::make(shape, std::move(*m), std::move(placements));
}

void check_tiling(const refit::Overlap& o) {
  for (const auto& d : o.destinations) {
    std::int64_t covered = 0;
    for (const auto& p : d.pieces) {
      if (!d.shard.box.contains(p.box) || !o.sources[p.source].box.contains(p.box)) std::abort();
      covered += p.box.volume();
    }
    if (covered != d.shard.box.volume()) std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  Bytes in{{{data, size}}};
  refit::Shape shape(1 + in.next() % 4);
  for (auto& s : shape) s = in.size();
  const auto src = layout_of(in, shape);
  const auto dst = layout_of(in, shape);
  refit::fuzz::expect_clean(src);
  refit::fuzz::expect_clean(dst);
  if (!src || !dst) return 0;
  const auto o = refit::overlaps(*src, *dst);
  refit::fuzz::expect_clean(o);
  if (o) check_tiling(*o);
  return 0;
}
