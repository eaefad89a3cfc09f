#include "homes.h"

#include <algorithm>
#include <iterator>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::lowering::detail {
namespace {

Located region_located(BufferKind side, const Region& r) {
  return Located{.kind = side,
                 .index = r.buffer,
                 .array = Array{.offset = r.offset, .box = &r.box, .strides = &r.strides}};
}

bool has_regions(const ShardRef& shard) { return shard.regions != nullptr && !shard.regions->empty(); }

}  // namespace

std::optional<Located> array_holding(BufferKind side, const ShardRef& shard, const Box& x) {
  if (!has_regions(shard))
    return Located{.kind = side, .index = shard.index, .array = Array{.offset = 0, .box = shard.box}};
  for (const Region& r : *shard.regions)
    if (r.box.contains(x)) return region_located(side, r);
  return std::nullopt;
}

std::vector<Located> arrays_overlapping(BufferKind side, const ShardRef& shard, const Box& x) {
  if (!has_regions(shard)) {
    if (!overlap(*shard.box, x)) return {};
    return {Located{.kind = side, .index = shard.index, .array = Array{.offset = 0, .box = shard.box}}};
  }
  std::vector<Located> out;
  for (const Region& r : *shard.regions)
    if (overlap(r.box, x)) out.push_back(region_located(side, r));
  return out;
}

std::vector<SourcePart> region_parts(const ShardRef& shard, const Segment& s, const Piece& p) {
  std::vector<Box> ranges;
  range_boxes(s.box, p.first, p.first + p.count, ranges);
  std::vector<SourcePart> out;
  for (const Region& r : *shard.regions)
    for (const Box& range : ranges)
      if (auto x = intersect(range, r.box)) {
        const auto volume = x->volume();
        out.push_back(SourcePart{.from = region_located(BufferKind::kSource, r),
                                 .box = std::move(*x),
                                 .first = 0,
                                 .count = volume});
      }
  return out;
}

void Homes::land(const Transfer& t, std::vector<SegmentLanding>& out) {
  out.assign(t.segments.size(), SegmentLanding{});
  const bool forwarded = lowered_->relays().forwarded(t.id);
  if (forwarded) scratch_ = align_up(scratch_);
  for (std::size_t k = 0; k < t.segments.size(); ++k) {
    const Segment& s = t.segments[k];
    const ShardRef dest = shards_->find(rank_, BufferKind::kDestination, s.tensor);
    auto& landing = out[k];
    if (dest.box != nullptr && dest.box->contains(s.box))
      landing.in_place = array_holding(BufferKind::kDestination, dest, s.box);
    if (!landing.in_place) {
      if (dest.box != nullptr) landing.partial = arrays_overlapping(BufferKind::kDestination, dest, s.box);
      if (forwarded) {
        // Back to back in message order, so that a run of them lands as one contiguous run.
        landing.in_place = Located{
            .kind = BufferKind::kScratch, .index = 0, .array = Array{.offset = scratch_, .box = &s.box}};
        scratch_ += lowered_->plan().segment_bytes(s).value;
      }
    }
    if (forwarded) received_.keep(t.id, *landing.in_place);
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
    return array_holding(BufferKind::kSource, src, s.box);
  }
  // A quantize step makes the rank's own boxes where they stay, so what forwards from it reads
  // them there, in one piece, however many segments the step made them in.
  if (plan.transfers[static_cast<std::size_t>(s.via)].quantizes()) {
    const ShardRef own = shards_->find(rank_, BufferKind::kDestination, s.tensor);
    if (own.box != nullptr && own.box->contains(s.box))
      return array_holding(BufferKind::kDestination, own, s.box);
  }
  const auto u = lowered_->relays().containing(s);
  if (!u) return std::optional<Located>{};
  const Located* kept = received_.find(s.via, *u);
  if (kept == nullptr)
    return mismatch(fmt::format("rank {} forwards transfer {} in transfer {} but did not receive it",
                                rank_.value, s.via, t.id));
  return *kept;
}

}  // namespace refit::lowering::detail

namespace refit::lowering {

void ReceivedSegments::keep(std::int32_t transfer, const Located& where) {
  if (starts_.empty() || starts_.back().transfer != transfer)
    starts_.push_back(Start{.transfer = transfer, .first = kept_.size()});
  kept_.push_back(where);
}

const Located* ReceivedSegments::find(std::int32_t transfer, std::int32_t segment) const {
  const auto it = std::ranges::lower_bound(starts_, transfer, {}, &Start::transfer);
  if (it == starts_.end() || it->transfer != transfer || segment < 0) return nullptr;
  const std::size_t end = std::next(it) == starts_.end() ? kept_.size() : std::next(it)->first;
  const std::size_t at = it->first + static_cast<std::size_t>(segment);
  return at < end ? &kept_[at] : nullptr;
}

}  // namespace refit::lowering

namespace refit::lowering::detail {

Result<std::vector<SourcePart>> gathered_parts(const LoweredPlan& lowered, const ReceivedSegments& received,
                                               Rank rank, const Segment& s, const Piece& p) {
  const auto parts = REFIT_TRY(lowered.relays().parts(s, p.first, p.count));
  std::vector<SourcePart> out;
  for (const auto& part : parts) {
    const Located* kept = received.find(s.via, part.segment);
    if (kept == nullptr)
      return mismatch(fmt::format("rank {} forwards transfer {} but did not receive it", rank.value, s.via));
    const auto volume = part.box.volume();
    out.push_back(SourcePart{.from = *kept, .box = part.box, .first = 0, .count = volume});
  }
  return out;
}

SideWalks::SideWalks(const LoweredPlan& lowered, const Transfer& t, std::span<const Located* const> homes,
                     Buffer& walks)
    : layout_(lowered.layout(t.id)), transfer_(t), homes_(homes), walks_(walks) {
  walks_.assign(t.segments.size(), std::nullopt);
}

const Walk& SideWalks::walk(std::size_t i) const {
  auto& w = walks_[i];
  if (!w)
    w.emplace(homes_[i]->array, transfer_.segments[i].box,
              layout_.element_size(static_cast<std::int32_t>(i)));
  return *w;
}

template <class F>
bool SideWalks::for_each_held_piece(std::int64_t k, F&& f) const {
  bool held = true;
  layout_.for_each_piece(k, [&](const Piece& p) {
    const auto i = static_cast<std::size_t>(p.segment);
    held = held && homes_[i] != nullptr;
    if (held) f(p, walk(i), *homes_[i]);
  });
  return held;
}

bool SideWalks::every_chunk_one_run() const {
  if (walks_.size() != 1 || homes_[0] == nullptr) return false;
  return walk(0).runs(0, layout_.bytes() / layout_.element_size(0)) <= 1;
}

ChunkCopy SideWalks::decide(std::int64_t k, const ZeroCopyRule& rule) const {
  std::int64_t runs = 0;
  // The previous piece, to tell whether this one continues it in the same buffer (its end is
  // worked out only then).
  const Located* last = nullptr;
  const Walk* last_walk = nullptr;
  std::int64_t last_index = 0;
  const bool held = for_each_held_piece(k, [&](const Piece& p, const Walk& w, const Located& home) {
    const bool same_buffer = last != nullptr && last->kind == home.kind && last->index == home.index;
    const bool continues = same_buffer && last_walk->offset_of(0, last_index) + last_walk->element_size() ==
                                              w.offset_of(0, p.first);
    runs += w.runs(p.first, p.count) - (continues ? 1 : 0);
    last = &home;
    last_walk = &w;
    last_index = p.first + p.count - 1;
  });
  ChunkCopy c{.bytes = layout_.chunk_bytes(k)};
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

std::vector<Run> SideWalks::runs(std::int64_t k) const {
  std::vector<Run> out;
  for_each_held_piece(k, [&](const Piece& p, const Walk& w, const Located& home) {
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
