#include "refit/lowering/plan_costs.h"

#include <deque>
#include <memory>

#include "homes.h"
#include "refit/core/try.h"

namespace refit::lowering {
namespace {

using detail::Homes;
using detail::ShardRef;

// Every rank's boxes of the problem, worked out when first asked for (a plan touches far fewer
// (rank, tensor) pairs than there are), found again by index. Slots are kept for the ranks asked
// about only, in order of their first question: a component of a plan of 16,384 GPUs a side asks
// about 1/64 of the ranks, and slots for all of them took 268 MB.
class ProblemShardFinder final : public detail::ShardFinder {
 public:
  explicit ProblemShardFinder(const ReshardProblem& problem)
      : problem_(problem), row_(static_cast<std::size_t>(problem.world_size()), -1) {}

  ShardRef find(Rank rank, BufferKind side, std::uint32_t tensor) const override {
    const bool source = side == BufferKind::kSource;
    const auto slots_per_rank = 2 * problem_.tensors().size();
    auto& row = row_[static_cast<std::size_t>(rank.value)];
    if (row < 0) {
      row = static_cast<std::int32_t>(slot_.size() / slots_per_rank);
      slot_.resize(slot_.size() + slots_per_rank, kUnknown);
    }
    auto& slot = slot_[static_cast<std::size_t>(row) * slots_per_rank + 2 * tensor + (source ? 1 : 0)];
    if (slot == kUnknown) slot = box_of(rank, source, tensor);
    if (slot == kNone) return {};
    return ShardRef{.index = 0, .box = &boxes_[static_cast<std::size_t>(slot)]};
  }

 private:
  static constexpr std::int32_t kUnknown = -2;
  static constexpr std::int32_t kNone = -1;

  std::int32_t box_of(Rank rank, bool source, std::uint32_t tensor) const {
    const auto& spec = problem_.tensors()[tensor];
    const Layout& layout = source ? spec.source : spec.destination;
    const auto position = layout.mesh().position_of_rank(rank);
    if (!position) return kNone;
    boxes_.push_back(layout.box_at_position(*position));
    return static_cast<std::int32_t>(boxes_.size() - 1);
  }

  const ReshardProblem& problem_;
  mutable std::vector<std::int32_t> row_;   // per rank: its row of slots, -1 before its first question
  mutable std::vector<std::int32_t> slot_;  // per (row, tensor, side): index into boxes_
  mutable std::deque<Box> boxes_;           // elements never move
};

// Buffers kept from one transfer to the next.
struct Sides {
  std::vector<SegmentLanding> landings;
  std::vector<std::optional<Located>> sources;
  std::vector<const Located*> homes;
  detail::SideWalks::Buffer walks;
};

// Only two facts of a side are charged: whether any chunk is staged, and how its edge chunk
// (the sender's first, the receiver's last) moves. So the edge chunk is decided first and the
// others only until one is staged: a side that packs stops there, walking none of the segments
// its later chunks read.
void cost_side(const LoweredPlan& lowered, const Transfer& t, Sides& buffers, const ZeroCopyRule& rule,
               bool sender, TransferCopyCost& cost) {
  const std::int64_t chunks = lowered.layout(t.id).chunks();
  const detail::SideWalks side(lowered, t, buffers.homes, buffers.walks);
  // Nothing to pack or unpack, known without deciding each of its chunks (an m2n-ring plan cuts
  // tens of millions); nor in a message without chunks.
  if (chunks == 0 || side.every_chunk_one_run()) return;
  const std::int64_t edge = sender ? 0 : chunks - 1;
  const ChunkCopy e = side.decide(edge, rule);
  bool staged = e.path == CopyPath::kStaged;
  for (std::int64_t k = 0; k < chunks && !staged; ++k)
    staged = k != edge && side.decide(k, rule).path == CopyPath::kStaged;
  if (!staged) return;
  const Bytes edge_bytes{e.path == CopyPath::kStaged ? e.bytes : 0};
  if (sender) {
    cost.packs = true;
    cost.pack_first = edge_bytes;
  } else {
    cost.unpacks = true;
    cost.unpack_last = edge_bytes;
  }
}

}  // namespace

Result<std::vector<TransferCopyCost>> copy_costs(const LoweredPlan& lowered, const ReshardProblem& problem,
                                                 const ZeroCopyRule& rule) {
  const Plan& plan = lowered.plan();
  const ProblemShardFinder finder(problem);
  std::vector<std::unique_ptr<Homes>> homes(static_cast<std::size_t>(plan.world_size()));
  const auto homes_of = [&](Rank r) -> Homes& {
    auto& h = homes[static_cast<std::size_t>(r.value)];
    if (!h) h = std::make_unique<Homes>(lowered, r, finder);
    return *h;
  };
  std::vector<TransferCopyCost> out(plan.transfers.size());
  Sides s;
  for (const Transfer& t : plan.transfers) {
    auto& cost = out[static_cast<std::size_t>(t.id)];
    if (t.quantizes()) {  // writes the rank's own boxes in place; no message to pack or unpack
      homes_of(t.receiver).land(t, s.landings);
      continue;
    }
    s.sources.clear();
    for (std::size_t k = 0; k < t.segments.size(); ++k)
      s.sources.push_back(REFIT_TRY(homes_of(t.sender).source(t, k)));
    s.homes.clear();
    for (const auto& h : s.sources) s.homes.push_back(h ? &*h : nullptr);
    cost_side(lowered, t, s, rule, true, cost);
    homes_of(t.receiver).land(t, s.landings);
    s.homes.clear();
    for (const auto& l : s.landings) s.homes.push_back(l.in_place ? &*l.in_place : nullptr);
    cost_side(lowered, t, s, rule, false, cost);
    // Parts of segments that land elsewhere are copied into the receiver's own box after landing.
    if (std::ranges::any_of(s.landings, [](const SegmentLanding& l) { return !l.partial.empty(); })) {
      cost.unpacks = true;
      const auto& layout = lowered.layout(t.id);
      cost.unpack_last = Bytes{layout.chunk_bytes(layout.chunks() - 1)};
    }
  }
  return out;
}

}  // namespace refit::lowering
