#include "refit/executors/repair_plan.h"

#include <algorithm>
#include <map>
#include <optional>

namespace refit {
namespace {

struct Piece {
  Rank origin;  // the rank that held it as a source shard
  Segment segment;
};

// The pieces of `box` of `tensor` that transfer `t` delivered, traced back to where they started.
void trace(const Plan& plan, const Transfer& t, std::uint32_t tensor, const Box& box,
           std::vector<Piece>& out) {
  for (const Segment& s : t.segments) {
    if (s.tensor != tensor) continue;
    const auto part = intersect(s.box, box);
    if (!part) continue;
    if (s.via == kFromSourceShard)
      out.push_back({.origin = t.sender, .segment = {.tensor = tensor, .box = *part}});
    else
      trace(plan, plan.transfers[static_cast<std::size_t>(s.via)], tensor, *part, out);
  }
}

// Every piece of `t` from a source rank not excluded; nothing when some piece cannot be re-sent.
std::optional<std::vector<Piece>> pieces_of(const Plan& plan, const Transfer& t,
                                            const std::vector<bool>& excluded) {
  if (t.quantizes()) return std::nullopt;
  std::vector<Piece> out;
  for (const Segment& s : t.segments) {
    const auto before = out.size();
    if (s.via == kFromSourceShard)
      out.push_back({.origin = t.sender, .segment = {.tensor = s.tensor, .box = s.box}});
    else
      trace(plan, plan.transfers[static_cast<std::size_t>(s.via)], s.tensor, s.box, out);
    std::int64_t traced = 0;
    for (auto i = before; i < out.size(); ++i) traced += out[i].segment.box.volume();
    // A piece a quantize step made (another tensor's via) traces to nothing here.
    if (traced != s.box.volume()) return std::nullopt;
  }
  const auto unusable = [&](const Piece& p) {
    return p.origin.value >= plan.source_ranks || excluded[static_cast<std::size_t>(p.origin.value)];
  };
  if (std::ranges::any_of(out, unusable)) return std::nullopt;
  return out;
}

// The dropped transfers into destination ranks that are not excluded, by receiver, in plan order.
// A training rank only relays: what it was to forward is re-fed to where it was going.
std::map<std::int32_t, std::vector<std::int32_t>> dropped_into_survivors(const Plan& plan,
                                                                         const std::vector<bool>& excluded,
                                                                         const std::vector<bool>& dropped) {
  std::map<std::int32_t, std::vector<std::int32_t>> out;
  for (const Transfer& t : plan.transfers)
    if (dropped[static_cast<std::size_t>(t.id)] && t.receiver.value >= plan.source_ranks &&
        !excluded[static_cast<std::size_t>(t.receiver.value)])
      out[t.receiver.value].push_back(t.id);
  return out;
}

// One transfer per starting rank of `pieces`, appended to `repair`.
void add_transfers(Plan& repair, const Transfer& dropped, const std::vector<Piece>& pieces) {
  std::map<std::int32_t, Transfer> by_origin;
  for (const Piece& p : pieces) {
    auto& t = by_origin[p.origin.value];
    t.sender = p.origin;
    t.segments.push_back(p.segment);
    t.bytes += repair.segment_bytes(p.segment);
  }
  for (auto& [origin, t] : by_origin) {
    t.id = static_cast<std::int32_t>(repair.transfers.size());
    t.receiver = dropped.receiver;
    t.link = LinkKind::kNetwork;
    t.chunk = dropped.chunk;
    repair.transfers.push_back(std::move(t));
  }
}

}  // namespace

Plan repair_plan(const Plan& plan, const std::vector<bool>& excluded, const std::vector<bool>& dropped) {
  Plan repair = plan.without_transfers();
  for (const auto& [receiver, ids] : dropped_into_survivors(plan, excluded, dropped)) {
    std::vector<std::pair<std::int32_t, std::vector<Piece>>> refeed;
    for (const auto id : ids) {
      auto pieces = pieces_of(plan, plan.transfers[static_cast<std::size_t>(id)], excluded);
      if (!pieces) break;
      refeed.emplace_back(id, std::move(*pieces));
    }
    if (refeed.size() != ids.size()) continue;
    for (const auto& [id, pieces] : refeed)
      add_transfers(repair, plan.transfers[static_cast<std::size_t>(id)], pieces);
  }
  return repair;
}

EngineOutcomes repaired_outcomes(const Plan& plan, const std::vector<bool>& dropped, const Plan& repair,
                                 const std::vector<bool>& repair_dropped, const EngineMembership& m,
                                 const std::vector<bool>& gone) {
  std::vector<bool> refed(static_cast<std::size_t>(plan.world_size()), false);
  for (const Transfer& t : repair.transfers) refed[static_cast<std::size_t>(t.receiver.value)] = true;
  auto still_dropped = dropped;
  for (const Transfer& t : plan.transfers)
    if (refed[static_cast<std::size_t>(t.receiver.value)])
      still_dropped[static_cast<std::size_t>(t.id)] = false;
  const auto first = engine_outcomes(plan, m, gone, still_dropped);
  const auto second = engine_outcomes(repair, m, gone, repair_dropped);
  EngineOutcomes out;
  for (const auto e : first.completed)
    (std::ranges::binary_search(second.missed, e) ? out.missed : out.completed).push_back(e);
  out.missed.insert(out.missed.end(), first.missed.begin(), first.missed.end());
  std::ranges::sort(out.missed);
  return out;
}

}  // namespace refit
