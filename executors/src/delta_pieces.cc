#include "delta_pieces.h"

#include <algorithm>

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::delta_pieces {
namespace {

// The rank's shard of `tensor` on one side that contains `box`, if any.
const ShardBuffer* shard_holding(const std::vector<ShardBuffer>& shards, std::uint32_t tensor,
                                 const Box& box) {
  const auto it = std::ranges::find_if(
      shards, [&](const ShardBuffer& s) { return s.tensor == tensor && s.box.contains(box); });
  return it == shards.end() ? nullptr : &*it;
}

[[nodiscard]] Result<void> check_buffers(const RankBuffers& buffers, Rank rank) {
  if (!buffers.source_parameters.empty() || !buffers.destination_parameters.empty())
    return unsupported(
        fmt::format("rank {}: a delta refit packs contiguous shards, not framework parameters", rank.value));
  return {};
}

// A quantize step's weights: the rank quantizes each whole box of a weight the step makes (the
// union of the step's segments of it) from its bf16 landing copy into its destination shards of
// the values and scales, as the UCX executor's dense step does.
[[nodiscard]] Result<std::vector<LandingQuantization>> landing_quantizations(const Plan& plan,
                                                                             const Transfer& t,
                                                                             std::int32_t round,
                                                                             const RankBuffers& buffers) {
  std::vector<LandingQuantization> out;
  for (const auto& w : landing_weights(plan.tensors)) {
    std::int64_t made = 0;
    for (const auto& s : t.segments) made += s.tensor == w.values ? s.box.volume() : 0;
    if (made == 0) continue;
    const auto& spec = plan.tensors[w.values];
    const auto scheme = spec.quantization->scheme;
    const auto refused = unsupported(fmt::format(
        "rank {}: transfer {} quantizes part of tensor '{}': a delta refit quantizes a landing "
        "rank's whole box, its landing copy, values and scales each a destination shard of its own",
        t.sender.value, t.id, spec.name));
    const auto values = std::ranges::find_if(buffers.destinations,
                                             [&](const ShardBuffer& b) { return b.tensor == w.values; });
    if (values == buffers.destinations.end() || made != values->box.volume()) return refused;
    const auto scale_box = quant_scale_box(scheme, values->box);
    const auto* copy = shard_holding(buffers.destinations, w.copy, values->box);
    const auto* scales = shard_holding(buffers.destinations, w.scales, scale_box);
    if (copy == nullptr || scales == nullptr || copy->box != values->box || scales->box != scale_box)
      return refused;
    out.push_back(LandingQuantization{
        .round = round, .scheme = scheme, .copy = *copy, .values = *values, .scales = *scales});
  }
  return out;
}

// Segment `s` of transfer `t`, piece `index` of the plan, which `rank` sends or receives: the shard
// it is packed from or lands in, or, for a piece the rank forwards as it arrived, the piece it
// arrived as.
[[nodiscard]] Result<void> add_piece(const Plan& plan, const Transfer& t, const Segment& s,
                                     std::int32_t index, Rank rank, const RankBuffers& buffers,
                                     RankPieces& out) {
  const bool sends = t.sender == rank;
  const auto& spec = plan.tensors[s.tensor];
  Piece piece{.index = index,
              .transfer = t.id,
              .round = out.schedule.round[static_cast<std::size_t>(t.id)],
              .hop = out.schedule.hop[static_cast<std::size_t>(t.id)],
              .forwards = sends ? out.schedule.forwards[static_cast<std::size_t>(index)] : -1,
              .via = s.via,
              .tensor = s.tensor,
              .box = s.box,
              .dtype = spec.dtype,
              .bytes = plan.segment_bytes(s).value,
              .name = fmt::format("tensor '{}' box {} of transfer {}", spec.name, s.box.to_string(), t.id),
              .shard = {}};
  if (piece.forwards >= 0) {
    out.forwards.push_back(std::move(piece));
    return {};
  }
  const bool relayed = sends && s.via != kFromSourceShard;
  const auto* shard =
      shard_holding(sends && !relayed ? buffers.sources : buffers.destinations, s.tensor, s.box);
  if (shard == nullptr && sends && !relayed)
    return mismatch(fmt::format("rank {}: {}: no source shard of the rank holds it", rank.value, piece.name));
  // A piece that lands outside the receiver's destination shards is a relay's scratch (and a
  // relay forwards from there), as gather-broadcast plans do.
  if (shard == nullptr)
    return unsupported(
        fmt::format("rank {}: {}: it lies outside the rank's own destination shards (a "
                    "relay's scratch, as in gather-broadcast plans and refit's relays through a "
                    "neighbour's NIC, or a missing buffer), which a delta refit does not take "
                    "(plan with --strategy refit or direct, for a delta refit: refit run --delta "
                    "and refit.plan(..., for_delta=True) plan so)",
                    rank.value, piece.name));
  piece.shard = *shard;
  (sends ? out.sends : out.receives).push_back(std::move(piece));
  return {};
}

}  // namespace

Result<RankPieces> rank_pieces(const Plan& plan, Rank rank, const RankBuffers& buffers) {
  if (auto ok = check_buffers(buffers, rank); !ok) return std::unexpected(ok.error());
  RankPieces out{.schedule = delta_schedule(plan)};
  for (const auto& t : plan.transfers) {
    const auto round = out.schedule.round[static_cast<std::size_t>(t.id)];
    if (t.quantizes()) {
      for (std::size_t s = 0; s < t.segments.size(); ++s) {
        if (t.sender == rank) out.quantized.push_back(out.total);
        out.rounds_of.push_back(round);
        ++out.total;
      }
      if (t.sender == rank)
        for (auto& q : REFIT_TRY(landing_quantizations(plan, t, round, buffers)))
          out.landing.push_back(std::move(q));
      continue;
    }
    for (const auto& s : t.segments) {
      const auto index = out.total++;
      out.rounds_of.push_back(round);
      if (t.sender == rank || t.receiver == rank) REFIT_TRY(add_piece(plan, t, s, index, rank, buffers, out));
    }
  }
  return out;
}

}  // namespace refit::delta_pieces
