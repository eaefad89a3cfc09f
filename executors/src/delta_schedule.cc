#include "refit/executors/delta_schedule.h"
#include "refit/core/index.h"

#include <algorithm>
#include <optional>

namespace refit {
namespace {

// The segment of `segments` with the box and tensor of `s`, searched from `start` on and then
// from the front: relays mostly forward their upstream's segments in order.
std::optional<std::int32_t> same_segment(const std::vector<Segment>& segments, const Segment& s,
                                         std::size_t start) {
  for (std::size_t i = 0; i < segments.size(); ++i) {
    const auto k = (start + i) % segments.size();
    if (segments[k].tensor == s.tensor && segments[k].box == s.box) return static_cast<std::int32_t>(k);
  }
  return std::nullopt;
}

// The pieces whose payloads `t` forwards as they arrived, one per segment: each segment the same
// box of the same tensor as a segment of its `via`, every via a transfer (not a quantize step) of
// one round. nullopt when `t` sends anything else.
std::optional<std::vector<std::int32_t>> forwarded(const Plan& plan, const Transfer& t,
                                                   const std::vector<std::int32_t>& first_piece,
                                                   const std::vector<std::int32_t>& round) {
  if (t.quantizes()) return std::nullopt;
  std::vector<std::int32_t> out;
  std::size_t next = 0;
  for (const auto& s : t.segments) {
    if (s.via == kFromSourceShard) return std::nullopt;
    const auto& u = plan.transfers[at(s.via)];
    if (u.quantizes() || round[at(s.via)] != round[at(t.segments.front().via)]) return std::nullopt;
    const auto k = same_segment(u.segments, s, next);
    if (!k) return std::nullopt;
    next = at(*k) + 1;
    out.push_back(first_piece[at(s.via)] + *k);
  }
  return out;
}

}  // namespace

DeltaSchedule delta_schedule(const Plan& plan) {
  const auto n = plan.transfers.size();
  DeltaSchedule out{.round = std::vector<std::int32_t>(n, 0),
                    .hop = std::vector<std::int32_t>(n, 0),
                    .origin = {},
                    .forwards = {},
                    .hops = {}};
  std::vector<std::int32_t> first_piece(n, 0);
  // Plan order puts what a transfer forwards before it, so its round and hop are known by then.
  for (const auto& t : plan.transfers) {
    const auto id = at(t.id);
    first_piece[id] = static_cast<std::int32_t>(out.origin.size());
    if (const auto from = forwarded(plan, t, first_piece, out.round)) {
      out.round[id] = out.round[at(t.segments.front().via)];
      for (std::size_t k = 0; k < from->size(); ++k) {
        out.hop[id] = std::max(out.hop[id], out.hop[at(t.segments[k].via)] + 1);
        out.origin.push_back(out.origin[at((*from)[k])]);
        out.forwards.push_back((*from)[k]);
      }
    } else {
      for (const auto u : t.upstream()) out.round[id] = std::max(out.round[id], out.round[at(u)] + 1);
      for (std::size_t k = 0; k < t.segments.size(); ++k) {
        out.origin.push_back(first_piece[id] + static_cast<std::int32_t>(k));
        out.forwards.push_back(-1);
      }
    }
    const auto r = at(out.round[id]);
    if (out.hops.size() <= r) out.hops.resize(r + 1, 0);
    out.hops[r] = std::max(out.hops[r], out.hop[id] + 1);
  }
  return out;
}

std::vector<std::int64_t> hop_payloads(const Plan& plan, const DeltaSchedule& schedule,
                                       std::span<const std::int64_t> payloads, std::int32_t round,
                                       std::int32_t hop) {
  std::vector<std::int64_t> out(payloads.size(), 0);
  std::size_t piece = 0;
  for (const auto& t : plan.transfers) {
    const bool moves = schedule.round[at(t.id)] == round && schedule.hop[at(t.id)] == hop;
    for (std::size_t s = 0; s < t.segments.size() && piece < out.size(); ++s, ++piece)
      if (moves) out[piece] = payloads[piece];
  }
  return out;
}

}  // namespace refit
