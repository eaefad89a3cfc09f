#include "refit/lowering/host_copy.h"

#include <cstring>
#include <vector>

#include "refit/core/try.h"

namespace refit::lowering {
namespace {

// Copies box x (inside both arrays) from one buffer to another, run by run.
void copy_box(const Array& from, const std::byte* from_base, const Array& to, std::byte* to_base,
              const Box& x, std::int64_t first, std::int64_t count, std::int64_t element_size) {
  const Walk w(from, to, x, element_size);
  w.for_each_run(first, count, [&](std::int64_t index, std::int64_t elements) {
    std::memcpy(to_base + w.offset_of(1, index), from_base + w.offset_of(0, index),
                static_cast<std::size_t>(elements * element_size));
  });
}

// The piece's elements as they sit in a packed chunk: element `first` of the segment at
// p.offset; the array's origin may lie before the chunk, but only the piece is addressed.
Array in_chunk(const Box& segment, const Piece& p, std::int64_t element_size) {
  return Array{.offset = p.offset - p.first * element_size, .box = &segment};
}

}  // namespace

std::byte* HostBuffers::base(BufferKind kind, std::int32_t index) const {
  switch (kind) {
    case BufferKind::kSource:
      return sources[static_cast<std::size_t>(index)];
    case BufferKind::kDestination:
      return destinations[static_cast<std::size_t>(index)];
    case BufferKind::kScratch:
      return scratch;
    case BufferKind::kStaging:
      break;
  }
  return nullptr;
}

Result<void> pack_chunk(const RankProgram& program, const Send& s, std::int64_t k, const HostBuffers& buffers,
                        std::byte* packed) {
  const MessageLayout& layout = program.lowered().layout(s.transfer);
  const Transfer& t = program.lowered().plan().transfers[static_cast<std::size_t>(s.transfer)];
  for (const Piece& p : layout.pieces(k)) {
    const auto es = layout.element_size(p.segment);
    const Box& segment = t.segments[static_cast<std::size_t>(p.segment)].box;
    for (const auto& part : REFIT_TRY(program.source_parts(s, p)))
      copy_box(part.from.array, buffers.base(part.from.kind, part.from.index), in_chunk(segment, p, es),
               packed, part.box, part.first, part.count, es);
  }
  return {};
}

void unpack_chunk(const RankProgram& program, const Receive& r, std::int64_t k, const HostBuffers& buffers,
                  const std::byte* packed) {
  const MessageLayout& layout = program.lowered().layout(r.transfer);
  const Transfer& t = program.lowered().plan().transfers[static_cast<std::size_t>(r.transfer)];
  std::vector<Box> ranges;
  for (const Piece& p : layout.pieces(k)) {
    const auto es = layout.element_size(p.segment);
    const Box& segment = t.segments[static_cast<std::size_t>(p.segment)].box;
    const SegmentLanding& landing = r.segments[static_cast<std::size_t>(p.segment)];
    const bool staged = packed != nullptr;
    if (staged && landing.in_place)
      copy_box(in_chunk(segment, p, es), packed, landing.in_place->array,
               buffers.base(landing.in_place->kind, landing.in_place->index), segment, p.first, p.count, es);
    if (landing.partial.empty()) continue;
    // Read from where the bytes arrived: the packed chunk, or their place if they landed there.
    const Array arrived = staged ? in_chunk(segment, p, es) : landing.in_place->array;
    const std::byte* arrived_base =
        staged ? packed : buffers.base(landing.in_place->kind, landing.in_place->index);
    ranges.clear();
    range_boxes(segment, p.first, p.first + p.count, ranges);
    for (const Located& dest : landing.partial)
      for (const Box& range : ranges)
        if (const auto x = intersect(range, *dest.array.box))
          copy_box(arrived, arrived_base, dest.array, buffers.base(dest.kind, dest.index), *x, 0, x->volume(),
                   es);
  }
}

}  // namespace refit::lowering
