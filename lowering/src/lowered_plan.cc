#include "refit/lowering/lowered_plan.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"
#include "refit/lowering/arrays.h"

namespace refit::lowering {
namespace {

void need(std::vector<ChunkWait>& waits, std::int32_t transfer, std::int64_t chunks) {
  auto it = std::ranges::find(waits, transfer, &ChunkWait::transfer);
  if (it == waits.end())
    waits.push_back(ChunkWait{.transfer = transfer, .chunks = chunks});
  else
    it->chunks = std::max(it->chunks, chunks);
}

}  // namespace

LoweredPlan::LoweredPlan(const Plan& plan, Bytes staging) : plan_(&plan), staging_(staging), relays_(plan) {
  layouts_.reserve(plan.transfers.size());
  for (const auto& t : plan.transfers) layouts_.emplace_back(plan, t, chunk_limit(t, staging));
}

Result<LoweredPlan> LoweredPlan::make(const Plan& plan, Bytes staging) {
  REFIT_TRY(validate_structure(plan));
  return make_validated(plan, staging);
}

Result<LoweredPlan> LoweredPlan::make_validated(const Plan& plan, Bytes staging) {
  if (staging < kMinStaging)
    return out_of_range(fmt::format("staging: {} bytes is below the {} bytes one chunk needs", staging.value,
                                    kMinStaging.value));
  // Every chunk is materialised: count them before cutting (a small staging cuts finer than the
  // plan's chunk, which check_chunk_count bounds).
  std::int64_t chunks = 0;
  for (const auto& t : plan.transfers) {
    const auto limit = chunk_limit(t, staging);
    chunks += ceil_div(std::max<std::int64_t>(0, t.bytes.value), limit);
    if (chunks > limits::kMaxChunks)
      // Named by what cuts them: the plan's chunk, or a staging below twice it.
      return out_of_range(fmt::format(
          "{}: the plan's chunks ({} bytes each: the plan's chunk of {} bytes, at most half the staging "
          "of {} bytes) number more than the {} that refit's executors and their simulation lower; choose "
          "a larger chunk, or staging where the chunk is cut by it (transfer {} of {})",
          limit < t.chunk.value ? "staging" : "chunk", limit, t.chunk.value, staging.value,
          limits::kMaxChunks, t.id, plan.transfers.size()));
  }
  return LoweredPlan(plan, staging);
}

std::int64_t LoweredPlan::count_chunks(const Plan& plan, Bytes staging) {
  std::int64_t chunks = 0;
  for (const auto& t : plan.transfers)
    chunks += MessageLayout::count_chunks(plan, t, chunk_limit(t, staging));
  return chunks;
}

std::int64_t LoweredPlan::chunks() const {
  std::int64_t total = 0;
  for (const auto& layout : layouts_) total += layout.chunks();
  return total;
}

std::int64_t LoweredPlan::chunk_holding(std::int32_t via, std::int32_t segment, std::int64_t index) const {
  const auto& up = layout(via);
  return up.chunk_of(up.segment_offset(segment) + (index + 1) * up.element_size(segment) - 1);
}

Result<std::vector<ChunkWait>> LoweredPlan::waits(std::int32_t t, std::int64_t k) const {
  const Transfer& transfer = plan_->transfers[static_cast<std::size_t>(t)];
  std::vector<ChunkWait> out;
  if (transfer.quantizes()) {
    // A block's scale needs all of the block, so the step waits for everything it quantizes.
    for (const std::int32_t up : transfer.upstream()) need(out, up, layout(up).chunks());
    return out;
  }
  for (const auto& piece : layout(t).pieces(k)) {
    const Segment& s = transfer.segments[static_cast<std::size_t>(piece.segment)];
    if (s.via == kFromSourceShard) continue;
    const Transfer& up = plan_->transfers[static_cast<std::size_t>(s.via)];
    // Row-major order inside a box agrees with row-major order inside any box holding it, so the
    // last element of a range (or of a part) is the latest the upstream delivered of it.
    if (const auto u = relays_.containing(s)) {
      const Box& ub = up.segments[static_cast<std::size_t>(*u)].box;
      const std::int64_t last = piece.first + piece.count - 1;
      const std::int64_t index = ub == s.box ? last : row_major_index(ub, point_at(s.box, last));
      need(out, s.via, chunk_holding(s.via, *u, index) + 1);
      continue;
    }
    const auto parts = REFIT_TRY_IN(relays_.parts(s, piece.first, piece.count),
                                    fmt::format("transfers[{}].segments[{}]", t, piece.segment));
    for (const auto& part : parts) {
      Shape last = part.box.offset;
      for (std::size_t d = 0; d < last.size(); ++d) last[d] += part.box.extent[d] - 1;
      const Box& ub = up.segments[static_cast<std::size_t>(part.segment)].box;
      need(out, s.via, chunk_holding(s.via, part.segment, row_major_index(ub, last)) + 1);
    }
  }
  return out;
}

namespace {

// Keeps the most `chunks` of each upstream, and the first chunk of the relay needing that much.
void most(std::vector<LoweredPlan::UpstreamNeed>& needs, std::int32_t transfer, std::int64_t chunks,
          std::int64_t at) {
  auto it = std::ranges::find(needs, transfer, &LoweredPlan::UpstreamNeed::transfer);
  if (it == needs.end())
    needs.push_back({.transfer = transfer, .chunks = chunks, .at = at});
  else if (chunks > it->chunks || (chunks == it->chunks && at < it->at))
    *it = {.transfer = transfer, .chunks = chunks, .at = at};
}

}  // namespace

std::pair<std::int64_t, std::int64_t> LoweredPlan::most_needed(std::int32_t via, std::int32_t segment,
                                                               const Box& part) const {
  const Box& ub =
      plan_->transfers[static_cast<std::size_t>(via)].segments[static_cast<std::size_t>(segment)].box;
  const auto needs = [&](std::int64_t k) {
    return chunk_holding(via, segment, part == ub ? k : row_major_index(ub, point_at(part, k))) + 1;
  };
  const std::int64_t most = needs(part.volume() - 1);
  std::int64_t first = 0;
  for (std::int64_t last = part.volume() - 1; first < last;) {  // needs(last) == most
    const std::int64_t mid = first + (last - first) / 2;
    if (needs(mid) < most)
      first = mid + 1;
    else
      last = mid;
  }
  return {most, first};
}

Result<std::vector<LoweredPlan::UpstreamNeed>> LoweredPlan::upstream_needs(std::int32_t t) const {
  const Transfer& transfer = plan_->transfers[static_cast<std::size_t>(t)];
  const auto& mine = layout(t);
  std::vector<UpstreamNeed> out;
  for (std::size_t i = 0; i < transfer.segments.size(); ++i) {
    const Segment& s = transfer.segments[i];
    if (s.via == kFromSourceShard) continue;
    const auto seg = static_cast<std::int32_t>(i);
    // The relay's chunk holding element `index` of s.
    const auto chunk_of = [&](std::int64_t index) {
      return mine.chunk_of(mine.segment_offset(seg) + (index + 1) * mine.element_size(seg) - 1);
    };
    if (const auto u = relays_.containing(s)) {
      const auto [chunks, first] = most_needed(s.via, *u, s.box);
      most(out, s.via, chunks, chunk_of(first));
      continue;
    }
    // A segment across upstream segments: parts of it, which may interleave in its order (an
    // upstream cut along a later dimension), each needing most from its own first element on.
    const auto parts =
        REFIT_TRY_IN(relays_.parts(s, 0, s.box.volume()), fmt::format("transfers[{}].segments[{}]", t, i));
    for (const auto& part : parts) {
      const auto [chunks, first] = most_needed(s.via, part.segment, part.box);
      most(out, s.via, chunks, chunk_of(row_major_index(s.box, point_at(part.box, first))));
    }
  }
  return out;
}

}  // namespace refit::lowering
