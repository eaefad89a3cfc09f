#include "chunk_sides.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

using lowering::Located;

// A staged chunk as an array: the piece's elements of `segment` at `chunk` + p.offset; the array's
// origin may lie before the chunk, but only elements of the piece are ever addressed through it.
Located in_staging(const Address& chunk, const Box& segment, const lowering::Piece& p, std::int64_t es) {
  return Located{.kind = lowering::BufferKind::kStaging,
                 .index = chunk.index,
                 .array = lowering::Array{.offset = chunk.offset + p.offset - p.first * es, .box = &segment}};
}

}  // namespace

Result<ChunkSides> ChunkSides::make(const lowering::LoweredPlan& lowered, const LocalView& view) {
  ChunkSides out(lowered, view);
  const auto& rule = execution_model(ExecutionModelId::kRefitNccl).zero_copy;
  for (const auto& local : view.ranks) {
    auto program = REFIT_TRY(lowering::lower_rank(lowered, local.rank, local.shards, rule));
    auto& sends = out.send_of_.emplace_back();
    auto& receives = out.receive_of_.emplace_back();
    for (std::size_t i = 0; i < program.sends().size(); ++i) sends[program.sends()[i].transfer] = i;
    for (std::size_t i = 0; i < program.receives().size(); ++i) receives[program.receives()[i].transfer] = i;
    out.scratch_bytes_ = lowering::align_up(out.scratch_bytes_);
    out.scratch_base_.push_back(out.scratch_bytes_);
    out.scratch_bytes_ += program.scratch().value;
    out.programs_.push_back(std::move(program));
  }
  return out;
}

std::int32_t ChunkSides::slot_of(Rank r) const {
  for (std::size_t i = 0; i < view_->ranks.size(); ++i)
    if (view_->ranks[i].rank == r) return static_cast<std::int32_t>(i);
  return -1;
}

Result<std::vector<Quantize>> ChunkSides::quantize(std::int32_t slot, std::int32_t transfer) const {
  const auto& program = programs_[static_cast<std::size_t>(slot)];
  const auto& steps = program.quantize_steps();
  const auto step = std::ranges::find(steps, transfer, &lowering::QuantizeStep::transfer);
  const auto& shards = program.shards().destinations;
  std::vector<Quantize> out;
  for (const auto& b : step->blocks) {
    if (!b.whole_boxes)
      return unsupported(
          fmt::format("quantize step {} makes {} of '{}', part of the rank's box: the NCCL executor "
                      "quantizes whole boxes",
                      transfer, b.blocks.to_string(),
                      lowered_->plan().tensors[shards[static_cast<std::size_t>(b.values)].tensor].name));
    const auto source = b.copy_offset * dtype_size(DType::kBF16);
    out.push_back(Quantize{.scheme = b.scheme,
                           .source = address(slot, lowering::BufferKind::kDestination, b.copy, source),
                           .values = address(slot, lowering::BufferKind::kDestination, b.values, 0),
                           .scales = address(slot, lowering::BufferKind::kDestination, b.scales, 0),
                           .shape = b.blocks.extent,
                           .strides = b.copy_strides});
  }
  return out;
}

Address ChunkSides::address(std::int32_t slot, lowering::BufferKind kind, std::int32_t index,
                            std::int64_t offset) const {
  const auto& local = view_->ranks[static_cast<std::size_t>(slot)];
  switch (kind) {
    case lowering::BufferKind::kSource:
      return Address{.kind = BufferKind::kShard, .index = local.first_source + index, .offset = offset};
    case lowering::BufferKind::kDestination:
      return Address{.kind = BufferKind::kShard, .index = local.first_destination + index, .offset = offset};
    case lowering::BufferKind::kScratch:
      return Address{.kind = BufferKind::kScratch,
                     .index = 0,
                     .offset = scratch_base_[static_cast<std::size_t>(slot)] + offset};
    case lowering::BufferKind::kStaging:
      break;
  }
  return Address{.kind = BufferKind::kStaging, .index = index, .offset = offset};
}

CopyOp ChunkSides::copy(std::int32_t slot, const Located& from, const Located& to, const Box& x,
                        std::int64_t first, std::int64_t count, std::int64_t element_size) const {
  const auto planned = plan_copy(from.array, to.array, x, first, count, element_size);
  return CopyOp{.src = address(slot, from.kind, from.index, planned.src_offset),
                .dst = address(slot, to.kind, to.index, planned.dst_offset),
                .geometry = planned.geometry};
}

void ChunkSides::extract(std::int32_t slot, const Located& arrived, const Located& dest, const Box& segment,
                         const lowering::Piece& p, std::int64_t element_size,
                         std::vector<CopyOp>& out) const {
  std::vector<Box> ranges;
  lowering::range_boxes(segment, p.first, p.first + p.count, ranges);
  for (const auto& r : ranges)
    if (auto x = intersect(r, *dest.array.box))
      out.push_back(copy(slot, arrived, dest, *x, 0, x->volume(), element_size));
}

Result<ChunkSide> ChunkSides::send(std::int32_t slot, std::int32_t transfer, std::int64_t k,
                                   const StagingAllocator& staging) const {
  const auto& program = programs_[static_cast<std::size_t>(slot)];
  const auto& s = program.sends()[send_of_[static_cast<std::size_t>(slot)].at(transfer)];
  if (s.chunks[static_cast<std::size_t>(k)].path == lowering::CopyPath::kInPlace) {
    const auto run = program.runs(s, k).front();
    return ChunkSide{.at = address(slot, run.kind, run.index, run.offset), .copies = {}};
  }
  const auto& layout = lowered_->layout(transfer);
  const auto& t = lowered_->plan().transfers[static_cast<std::size_t>(transfer)];
  ChunkSide side{.at = staging(layout.chunk_bytes(k)), .copies = {}};
  for (const auto& p : layout.pieces(k)) {
    const auto es = layout.element_size(p.segment);
    const Box& segment = t.segments[static_cast<std::size_t>(p.segment)].box;
    const Located packed = in_staging(side.at, segment, p, es);
    for (const auto& part : REFIT_TRY(program.source_parts(s, p)))
      side.copies.push_back(copy(slot, part.from, packed, part.box, part.first, part.count, es));
  }
  return side;
}

ChunkSide ChunkSides::receive(std::int32_t slot, std::int32_t transfer, std::int64_t k,
                              const StagingAllocator& staging) const {
  const auto& program = programs_[static_cast<std::size_t>(slot)];
  const auto& r = program.receives()[receive_of_[static_cast<std::size_t>(slot)].at(transfer)];
  const auto& layout = lowered_->layout(transfer);
  const auto& t = lowered_->plan().transfers[static_cast<std::size_t>(transfer)];
  const bool staged = r.chunks[static_cast<std::size_t>(k)].path == lowering::CopyPath::kStaged;
  ChunkSide side;
  if (staged) {
    side.at = staging(layout.chunk_bytes(k));
  } else {
    const auto run = program.runs(r, k).front();
    side.at = address(slot, run.kind, run.index, run.offset);
  }
  for (const auto& p : layout.pieces(k)) {
    const auto es = layout.element_size(p.segment);
    const Box& segment = t.segments[static_cast<std::size_t>(p.segment)].box;
    const auto& landing = r.segments[static_cast<std::size_t>(p.segment)];
    // Extracts read the bytes where the receive put them, never a copy made in the same batch.
    const Located arrived = staged ? in_staging(side.at, segment, p, es) : *landing.in_place;
    if (staged && landing.in_place)
      side.copies.push_back(copy(slot, arrived, *landing.in_place, segment, p.first, p.count, es));
    for (const auto& dest : landing.partial) extract(slot, arrived, dest, segment, p, es, side.copies);
  }
  return side;
}

}  // namespace refit::nccl_detail
