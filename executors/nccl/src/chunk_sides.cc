#include "chunk_sides.h"

namespace refit::nccl_detail {
namespace {

CopyOp copy_op(const Located& from, const Located& to, const Box& x, std::int64_t first, std::int64_t count,
               std::int64_t es) {
  const auto planned = plan_copy(from.array, to.array, x, first, count, es);
  return CopyOp{from.address(planned.src_offset), to.address(planned.dst_offset), planned.geometry};
}

}  // namespace

bool RunJoiner::add(const Located& array, const Box& box, std::int64_t first, std::int64_t count,
                    std::int64_t es) {
  const auto run = contiguous_run(array.array, box, first, count, es);
  if (!run) return false;
  if (started_ && (array.kind != start_.kind || array.index != start_.index || *run != end_)) return false;
  if (!started_) start_ = array.address(*run);
  started_ = true;
  end_ = *run + count * es;
  return true;
}

Stored ChunkSides::in_staging(const Address& chunk, const Segment& s, const Piece& p) const {
  // Element `first` of the segment sits at chunk + p.offset; the box's origin may lie before the
  // chunk, but only elements of the piece are ever addressed through it.
  return Stored{chunk.offset + p.offset - p.first * element_size(s), s.box};
}

void ChunkSides::extract(const Located& from, const Located& dest, const Segment& s, const Piece& p,
                         std::vector<CopyOp>& out) const {
  std::vector<Box> ranges;
  range_boxes(s.box, p.first, p.first + p.count, ranges);
  for (const auto& r : ranges)
    if (auto x = intersect(r, dest.array.box))
      out.push_back(copy_op(from, dest, *x, 0, x->volume(), element_size(s)));
}

Result<ChunkSide> ChunkSides::send(std::int32_t slot, const Transfer& t, const MessageLayout& layout,
                                   std::int64_t k, const StagingAllocator& staging) const {
  const auto pieces = layout.pieces(k);
  std::vector<std::vector<SendPart>> parts;
  RunJoiner run;
  bool direct = true;
  for (const auto& p : pieces) {
    auto got = storage_.send_parts(slot, t, p);
    if (!got) return std::unexpected(std::move(got.error()));
    const auto& s = t.segments[static_cast<std::size_t>(p.segment)];
    direct =
        direct && got->size() == 1 && run.add(got->front().from, s.box, p.first, p.count, element_size(s));
    parts.push_back(std::move(*got));
  }
  if (direct) return ChunkSide{run.start(), {}};
  ChunkSide side{staging(layout.chunk_bytes(k)), {}};
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto& s = t.segments[static_cast<std::size_t>(pieces[i].segment)];
    const Located packed{BufferKind::kStaging, side.at.index, in_staging(side.at, s, pieces[i])};
    for (const auto& part : parts[i])
      side.copies.push_back(copy_op(part.from, packed, part.box, part.first, part.count, element_size(s)));
  }
  return side;
}

ChunkSide ChunkSides::receive(std::int32_t slot, const Transfer& t, const MessageLayout& layout,
                              std::int64_t k, const StagingAllocator& staging) const {
  const auto pieces = layout.pieces(k);
  std::vector<std::optional<Located>> lands;
  RunJoiner run;
  bool direct = true;
  for (const auto& p : pieces) {
    const auto& s = t.segments[static_cast<std::size_t>(p.segment)];
    lands.push_back(storage_.landing(slot, t, p.segment));
    direct = direct && lands.back() && run.add(*lands.back(), s.box, p.first, p.count, element_size(s));
  }
  ChunkSide side{direct ? run.start() : staging(layout.chunk_bytes(k)), {}};
  for (std::size_t i = 0; i < pieces.size(); ++i) {
    const auto& p = pieces[i];
    const auto& s = t.segments[static_cast<std::size_t>(p.segment)];
    // Extracts read the bytes where the receive put them, never a copy made in the same batch.
    const Located arrived =
        direct ? *lands[i] : Located{BufferKind::kStaging, side.at.index, in_staging(side.at, s, p)};
    if (!direct && lands[i])
      side.copies.push_back(copy_op(arrived, *lands[i], s.box, p.first, p.count, element_size(s)));
    if (auto dest = storage_.partial_destination(slot, s.tensor, s.box))
      extract(arrived, *dest, s, p, side.copies);
  }
  return side;
}

}  // namespace refit::nccl_detail
