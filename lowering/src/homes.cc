#include "homes.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::lowering::detail {
namespace {

Located shard_located(BufferKind side, const ShardRef& shard) {
  return Located{.kind = side, .index = shard.index, .array = Array{.offset = 0, .box = shard.box}};
}

// Calls f(piece, walk, first byte, end byte, home) for each piece of chunk k held in one array.
template <class F>
bool walk_pieces(const LoweredPlan& lowered, const Transfer& t, std::int64_t k,
                 std::span<const Located* const> homes, F&& f) {
  const MessageLayout& layout = lowered.layout(t.id);
  bool held = true;
  layout.for_each_piece(k, [&](const Piece& p) {
    const Located* home = homes[static_cast<std::size_t>(p.segment)];
    if (!held || home == nullptr) {
      held = false;
      return;
    }
    const Walk walk(home->array, t.segments[static_cast<std::size_t>(p.segment)].box,
                    layout.element_size(p.segment));
    f(p, walk, *home);
  });
  return held;
}

}  // namespace

void Homes::land(const Transfer& t, std::vector<SegmentLanding>& out) {
  out.assign(t.segments.size(), SegmentLanding{});
  const bool forwarded = lowered_->relays().forwarded(t.id);
  if (forwarded) scratch_ = align_up(scratch_);
  for (std::size_t k = 0; k < t.segments.size(); ++k) {
    const Segment& s = t.segments[k];
    const ShardRef dest = shards_->find(rank_, BufferKind::kDestination, s.tensor);
    auto& landing = out[k];
    if (dest.box != nullptr && dest.box->contains(s.box)) {
      landing.in_place = shard_located(BufferKind::kDestination, dest);
    } else {
      if (dest.box != nullptr && intersect(*dest.box, s.box))
        landing.partial = shard_located(BufferKind::kDestination, dest);
      if (forwarded) {
        // Back to back in message order, so that a run of them lands as one contiguous run.
        landing.in_place = Located{
            .kind = BufferKind::kScratch, .index = 0, .array = Array{.offset = scratch_, .box = &s.box}};
        scratch_ += lowered_->plan().segment_bytes(s).value;
      }
    }
    if (forwarded) received_.emplace(key(t.id, k), *landing.in_place);
  }
}

Result<std::optional<Located>> Homes::source(const Transfer& t, std::size_t k) const {
  const Segment& s = t.segments[k];
  const Plan& plan = lowered_->plan();
  if (s.via == kFromSourceShard) {
    const ShardRef src = shards_->find(rank_, BufferKind::kSource, s.tensor);
    if (src.box == nullptr || !src.box->contains(s.box))
      return mismatch(
          fmt::format("rank {} sends {} of tensor '{}' in transfer {} but holds no source shard "
                      "containing it",
                      rank_.value, s.box.to_string(), plan.tensors[s.tensor].name, t.id));
    return shard_located(BufferKind::kSource, src);
  }
  const auto u = lowered_->relays().containing(s);
  if (!u) return std::optional<Located>{};
  const auto it = received_.find(key(s.via, static_cast<std::size_t>(*u)));
  if (it == received_.end())
    return mismatch(fmt::format("rank {} forwards transfer {} in transfer {} but did not receive it",
                                rank_.value, s.via, t.id));
  return it->second;
}

Result<std::vector<SourcePart>> gathered_parts(const LoweredPlan& lowered, const ReceivedSegments& received,
                                               Rank rank, const Segment& s, const Piece& p) {
  const auto parts = REFIT_TRY(lowered.relays().parts(s, p.first, p.count));
  std::vector<SourcePart> out;
  for (const auto& part : parts) {
    const auto it = received.find(Homes::key(s.via, static_cast<std::size_t>(part.segment)));
    if (it == received.end())
      return mismatch(fmt::format("rank {} forwards transfer {} but did not receive it", rank.value, s.via));
    const auto volume = part.box.volume();
    out.push_back(SourcePart{.from = it->second, .box = part.box, .first = 0, .count = volume});
  }
  return out;
}

ChunkCopy decide(const LoweredPlan& lowered, const Transfer& t, std::int64_t k,
                 std::span<const Located* const> homes, const ZeroCopyRule& rule) {
  std::int64_t runs = 0;
  std::int64_t end = -1;
  const Located* last = nullptr;
  const bool held =
      walk_pieces(lowered, t, k, homes, [&](const Piece& p, const Walk& w, const Located& home) {
        const std::int64_t begin = w.offset_of(0, p.first);
        const bool continues =
            last != nullptr && last->kind == home.kind && last->index == home.index && end == begin;
        runs += w.runs(p.first, p.count) - (continues ? 1 : 0);
        end = w.offset_of(0, p.first + p.count - 1) + w.element_size();
        last = &home;
      });
  ChunkCopy c{.bytes = lowered.layout(t.id).chunk_bytes(k)};
  if (!held) {
    c.path = CopyPath::kStaged;
    c.why = CopyReason::kNotInOnePlace;
    return c;
  }
  c.runs = runs;
  if (runs <= 1)
    c.why = CopyReason::kOneRun;
  else if (runs <= rule.max_runs)
    c.why = CopyReason::kFewRuns;
  else if (c.bytes / runs >= rule.min_mean_run.value)
    c.why = CopyReason::kLongRuns;
  else
    c = ChunkCopy{.path = CopyPath::kStaged, .why = CopyReason::kScattered, .runs = runs, .bytes = c.bytes};
  return c;
}

std::vector<Run> chunk_runs(const LoweredPlan& lowered, const Transfer& t, std::int64_t k,
                            std::span<const Located* const> homes) {
  std::vector<Run> out;
  walk_pieces(lowered, t, k, homes, [&](const Piece& p, const Walk& w, const Located& home) {
    w.for_each_run(p.first, p.count, [&](std::int64_t index, std::int64_t elements) {
      const Run run{.stream = p.offset + (index - p.first) * w.element_size(),
                    .kind = home.kind,
                    .index = home.index,
                    .offset = w.offset_of(0, index),
                    .length = elements * w.element_size()};
      if (!out.empty() && out.back().kind == run.kind && out.back().index == run.index &&
          out.back().offset + out.back().length == run.offset)
        out.back().length += run.length;
      else
        out.push_back(run);
    });
  });
  return out;
}

}  // namespace refit::lowering::detail
