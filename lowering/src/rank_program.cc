#include "refit/lowering/rank_program.h"

#include <algorithm>
#include <array>

#include <fmt/format.h>

#include "homes.h"
#include "refit/core/try.h"

namespace refit::lowering {
namespace {

using detail::Homes;
using detail::ShardRef;

// A rank's shards, found by tensor in O(1).
class RankShardFinder final : public detail::ShardFinder {
 public:
  RankShardFinder(const RankShards& shards, std::size_t tensors)
      : shards_(shards), source_(tensors, -1), destination_(tensors, -1) {}

  // Refuses a shard of a tensor the plan does not have, outside its tensor, or a second one of a
  // tensor on one side.
  [[nodiscard]] Result<void> index(const Plan& plan) {
    REFIT_TRY(index_side(plan, shards_.sources, source_, "sources"));
    return index_side(plan, shards_.destinations, destination_, "destinations");
  }

  ShardRef find(Rank, BufferKind side, std::uint32_t tensor) const override {
    const bool source = side == BufferKind::kSource;
    const auto i = (source ? source_ : destination_)[tensor];
    if (i < 0) return {};
    const auto& shard = (source ? shards_.sources : shards_.destinations)[static_cast<std::size_t>(i)];
    return ShardRef{.index = i, .box = &shard.box, .regions = &shard.regions};
  }
  const std::vector<std::int32_t>& sources_by_tensor() const { return source_; }

 private:
  [[nodiscard]] static Result<void> index_side(const Plan& plan, const std::vector<Shard>& shards,
                                               std::vector<std::int32_t>& by_tensor, std::string_view side) {
    for (std::size_t i = 0; i < shards.size(); ++i) {
      const Shard& s = shards[i];
      const auto at = fmt::format("{}[{}]", side, i);
      if (s.tensor >= plan.tensors.size())
        return mismatch(
            fmt::format("{}: tensor {} is not in the plan ({} tensors)", at, s.tensor, plan.tensors.size()));
      const TensorSpec& t = plan.tensors[s.tensor];
      if (s.box.rank() != t.shape.size() || s.box.extent.size() != s.box.rank() ||
          !Box::whole(t.shape).contains(s.box))
        return mismatch(fmt::format("{}: box {} is not inside tensor '{}'", at, s.box.to_string(), t.name));
      if (by_tensor[s.tensor] >= 0)
        return mismatch(fmt::format("{}: a second {} shard of tensor '{}'", at, side, t.name));
      REFIT_TRY_IN(check_regions(s), fmt::format("{}: tensor '{}' box {}", at, t.name, s.box.to_string()));
      by_tensor[s.tensor] = static_cast<std::int32_t>(i);
    }
    return {};
  }

  // Regions tile the box when each lies inside it, no two share an element and their volumes add
  // up to the box's.
  [[nodiscard]] static Result<void> check_regions(const Shard& s) {
    std::int64_t volume = 0;
    for (std::size_t i = 0; i < s.regions.size(); ++i) {
      const Region& r = s.regions[i];
      if (r.box.rank() != s.box.rank() || r.box.extent.size() != r.box.rank() || !s.box.contains(r.box) ||
          r.strides.size() != r.box.rank() || r.buffer < 0 || r.offset < 0)
        return mismatch(fmt::format("region {} ({}) is not a strided part of the box", i, r.box.to_string()));
      for (std::size_t j = 0; j < i; ++j)
        if (overlap(r.box, s.regions[j].box))
          return mismatch(fmt::format("regions {} and {} share elements", j, i));
      volume += r.box.volume();
    }
    if (!s.regions.empty() && volume != s.box.volume())
      return mismatch(fmt::format("regions cover {} of its {} elements", volume, s.box.volume()));
    return {};
  }

  const RankShards& shards_;
  std::vector<std::int32_t> source_;
  std::vector<std::int32_t> destination_;
};

std::vector<const Located*> homes_of(const std::vector<SegmentLanding>& segments) {
  std::vector<const Located*> out;
  out.reserve(segments.size());
  for (const auto& s : segments) out.push_back(s.in_place ? &*s.in_place : nullptr);
  return out;
}

std::vector<const Located*> homes_of(const std::vector<std::optional<Located>>& segments) {
  std::vector<const Located*> out;
  out.reserve(segments.size());
  for (const auto& s : segments) out.push_back(s ? &*s : nullptr);
  return out;
}

void demand(StagingDemand& d, const ChunkCopy& c) {
  if (c.path != CopyPath::kStaged) return;
  ++d.chunks;
  d.largest = std::max(d.largest, Bytes{c.bytes});
}

// The rank's destination shard of `tensor`, which a quantize step reads or writes whole blocks of:
// present, in a buffer of its own, and holding `box`.
[[nodiscard]] Result<ShardRef> step_shard(const Plan& plan, const RankShardFinder& finder, Rank rank,
                                          std::uint32_t tensor, const Box& box) {
  const ShardRef shard = finder.find(rank, BufferKind::kDestination, tensor);
  const auto& name = plan.tensors[tensor].name;
  if (shard.box == nullptr || !shard.box->contains(box))
    return mismatch(
        fmt::format("its destination buffer of tensor '{}' does not hold {}", name, box.to_string()));
  if (shard.regions != nullptr && !shard.regions->empty())
    return unsupported(
        fmt::format("tensor '{}' is a framework's parameter regions; a quantize step needs its box in a "
                    "buffer of its own",
                    name));
  return shard;
}

// What quantize step `t` makes on the rank, from the weights its scales segments scale.
[[nodiscard]] Result<QuantizeStep> quantize_step(const LoweredPlan& lowered, const RankShardFinder& finder,
                                                 Rank rank, const Transfer& t) {
  const Plan& plan = lowered.plan();
  QuantizeStep out{.transfer = t.id, .blocks = {}, .waits = REFIT_TRY(lowered.waits(t.id, 0))};
  const auto weights = landing_weights(plan.tensors);
  for (const auto& s : t.segments) {
    const auto w = std::ranges::find(weights, s.tensor, &LandingWeight::scales);
    if (w == weights.end()) continue;  // values: the scales segments name their blocks
    const auto& weight = plan.tensors[w->values];
    const auto scheme = weight.quantization->scheme;
    Box blocks = quant_blocks_of(scheme, s.box, weight.shape);
    const auto where = fmt::format("quantize step {} of rank {}", t.id, rank.value);
    // A plan whose tensors say other shapes than a problem would (a hand-edited file).
    if (std::ranges::any_of(blocks.extent, [](std::int64_t e) { return e <= 0; }) ||
        quant_scale_box(scheme, blocks) != s.box)
      return mismatch(fmt::format("{}: scales {} of tensor '{}' are not the blocks of a box of '{}'", where,
                                  s.box.to_string(), plan.tensors[s.tensor].name, weight.name));
    const auto copy = REFIT_TRY_IN(step_shard(plan, finder, rank, w->copy, blocks), where);
    const auto values = REFIT_TRY_IN(step_shard(plan, finder, rank, w->values, blocks), where);
    const auto scales = REFIT_TRY_IN(step_shard(plan, finder, rank, w->scales, s.box), where);
    out.blocks.push_back(QuantizeBlocks{.scheme = scheme,
                                        .copy = copy.index,
                                        .values = values.index,
                                        .scales = scales.index,
                                        .blocks = blocks,
                                        .scale_box = s.box,
                                        .copy_offset = row_major_index(*copy.box, blocks.offset),
                                        .copy_strides = row_major_strides(copy.box->extent),
                                        .whole_boxes = *values.box == blocks && *scales.box == s.box});
  }
  return out;
}

}  // namespace

std::string_view copy_reason_text(CopyReason reason) {
  static constexpr std::array<std::string_view, kCopyReasons> kTexts{
      "one contiguous run",
      "a few contiguous runs",
      "runs long enough to move one by one",
      "too many short runs: packed",
      "not held whole in one buffer: staged",
  };
  return kTexts.at(static_cast<std::size_t>(reason));
}

RankShards shards_of(const ReshardProblem& problem, Rank rank) {
  RankShards out;
  const auto& tensors = problem.tensors();
  for (std::uint32_t t = 0; t < tensors.size(); ++t)
    for (const bool source : {true, false}) {
      const Layout& layout = source ? tensors[t].source : tensors[t].destination;
      if (!layout.mesh().position_of_rank(rank)) continue;
      auto box = layout.local_box(rank);
      if (!box || box->empty()) continue;
      (source ? out.sources : out.destinations).push_back(Shard{.tensor = t, .box = std::move(*box)});
    }
  return out;
}

std::vector<Run> RankProgram::runs(const Receive& r, std::int64_t chunk) const {
  const auto homes = homes_of(r.segments);
  detail::SideWalks::Buffer walks;
  return detail::SideWalks(*lowered_, lowered_->plan().transfers[static_cast<std::size_t>(r.transfer)], homes,
                           walks)
      .runs(chunk);
}

std::vector<Run> RankProgram::runs(const Send& s, std::int64_t chunk) const {
  const auto homes = homes_of(s.segments);
  detail::SideWalks::Buffer walks;
  return detail::SideWalks(*lowered_, lowered_->plan().transfers[static_cast<std::size_t>(s.transfer)], homes,
                           walks)
      .runs(chunk);
}

Result<std::vector<SourcePart>> RankProgram::source_parts(const Send& s, const Piece& p) const {
  const Segment& seg = lowered_->plan()
                           .transfers[static_cast<std::size_t>(s.transfer)]
                           .segments[static_cast<std::size_t>(p.segment)];
  if (const auto& home = s.segments[static_cast<std::size_t>(p.segment)])
    return std::vector<SourcePart>{
        SourcePart{.from = *home, .box = seg.box, .first = p.first, .count = p.count}};
  if (seg.via == kFromSourceShard) {
    const auto i = source_shard_[seg.tensor];
    const Shard& shard = shards_.sources[static_cast<std::size_t>(i)];
    return detail::region_parts(ShardRef{.index = i, .box = &shard.box, .regions = &shard.regions}, seg, p);
  }
  return REFIT_TRY_IN(detail::gathered_parts(*lowered_, received_, rank_, seg, p),
                      fmt::format("transfer {}", s.transfer));
}

Result<RankProgram> lower_rank(const LoweredPlan& lowered, Rank rank, RankShards shards,
                               const ZeroCopyRule& rule) {
  const Plan& plan = lowered.plan();
  if (rank.value < 0 || rank.value >= plan.world_size())
    return out_of_range(fmt::format("rank {} is not in the plan's {} ranks", rank.value, plan.world_size()));
  RankProgram program(lowered, rank, std::move(shards), rule);
  RankShardFinder finder(program.shards_, plan.tensors.size());
  REFIT_TRY_IN(finder.index(plan), fmt::format("rank {}", rank.value));
  Homes homes(lowered, rank, finder);
  detail::SideWalks::Buffer walks;
  for (const Transfer& t : plan.transfers) {
    if (t.quantizes()) {
      if (t.sender != rank) continue;
      std::vector<SegmentLanding> made;  // in the rank's own boxes, where relays read them
      homes.land(t, made);
      program.steps_.push_back(REFIT_TRY(quantize_step(lowered, finder, rank, t)));
      continue;
    }
    if (t.receiver == rank) {
      Receive r{.transfer = t.id, .peer = t.sender};
      homes.land(t, r.segments);
      const auto at = homes_of(r.segments);
      const detail::SideWalks side(lowered, t, at, walks);
      for (std::int64_t k = 0; k < lowered.layout(t.id).chunks(); ++k) {
        r.chunks.push_back(side.decide(k, rule));
        demand(program.receive_staging_, r.chunks.back());
      }
      r.extracts =
          std::ranges::any_of(r.segments, [](const SegmentLanding& l) { return !l.partial.empty(); });
      program.receives_.push_back(std::move(r));
    }
    if (t.sender == rank) {
      Send s{.transfer = t.id, .peer = t.receiver};
      for (std::size_t k = 0; k < t.segments.size(); ++k)
        s.segments.push_back(REFIT_TRY_IN(homes.source(t, k), fmt::format("rank {}", rank.value)));
      const auto at = homes_of(s.segments);
      const detail::SideWalks side(lowered, t, at, walks);
      for (std::int64_t k = 0; k < lowered.layout(t.id).chunks(); ++k) {
        s.chunks.push_back(side.decide(k, rule));
        demand(program.send_staging_, s.chunks.back());
        s.waits.push_back(REFIT_TRY(lowered.waits(t.id, k)));
      }
      program.sends_.push_back(std::move(s));
    }
  }
  program.source_shard_ = finder.sources_by_tensor();
  program.scratch_ = homes.scratch();
  program.received_ = std::move(homes).take_received();
  return program;
}

}  // namespace refit::lowering
