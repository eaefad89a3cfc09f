#include "storage.h"

#include <fmt/format.h>

namespace refit::nccl_detail {

Storage::Storage(const Plan& plan, const RelayIndex& relays, const LocalView& view)
    : plan_(plan), relays_(relays), view_(view) {
  for (const auto& t : plan.transfers) {
    const auto slot = slot_of(t.receiver);
    if (slot < 0 || !relays.forwarded(t.id)) continue;
    // Back to back in message order, so that a run of them receives as one contiguous chunk.
    const auto& dests = view.ranks[static_cast<std::size_t>(slot)].destinations;
    scratch_bytes_ = align_up(scratch_bytes_);
    for (std::size_t i = 0; i < t.segments.size(); ++i) {
      const auto& s = t.segments[i];
      if (shard_holding(dests, s.tensor, s.box)) continue;
      scratch_[key(t.id, static_cast<std::int32_t>(i))] = scratch_bytes_;
      scratch_bytes_ += plan.segment_bytes(s).value;
    }
  }
}

std::int32_t Storage::slot_of(Rank r) const {
  for (std::size_t i = 0; i < view_.ranks.size(); ++i)
    if (view_.ranks[i].rank == r) return static_cast<std::int32_t>(i);
  return -1;
}

std::optional<Located> Storage::shard_holding(const std::vector<LocalShard>& shards, std::uint32_t tensor,
                                              const Box& box) const {
  for (const auto& s : shards)
    if (s.tensor == tensor && s.box.contains(box))
      return Located{BufferKind::kShard, s.buffer, Stored{0, s.box}};
  return std::nullopt;
}

Located Storage::received(std::int32_t slot, std::int32_t v, std::int32_t segment) const {
  const auto& s = plan_.transfers[static_cast<std::size_t>(v)].segments[static_cast<std::size_t>(segment)];
  if (auto dest = shard_holding(view_.ranks[static_cast<std::size_t>(slot)].destinations, s.tensor, s.box))
    return *dest;
  return Located{BufferKind::kScratch, 0, Stored{scratch_.at(key(v, segment)), s.box}};
}

Result<std::vector<SendPart>> Storage::send_parts(std::int32_t slot, const Transfer& t,
                                                  const Piece& p) const {
  const auto& s = t.segments[static_cast<std::size_t>(p.segment)];
  if (s.via == kFromSourceShard) {
    auto shard = shard_holding(view_.ranks[static_cast<std::size_t>(slot)].sources, s.tensor, s.box);
    if (!shard)
      return invalid(fmt::format(
          "rank {} sends {} of tensor '{}' in transfer {} but no source buffer of it holds that box",
          t.sender.value, s.box.to_string(), plan_.tensors[s.tensor].name, t.id));
    return std::vector<SendPart>{SendPart{std::move(*shard), s.box, p.first, p.count}};
  }
  if (auto u = relays_.containing(s))
    return std::vector<SendPart>{SendPart{received(slot, s.via, *u), s.box, p.first, p.count}};
  auto parts = relays_.parts(s, p.first, p.count);
  if (!parts) return std::unexpected(std::move(parts.error()).in(fmt::format("transfer {}", t.id)));
  std::vector<SendPart> out;
  for (auto& part : *parts) {
    const auto volume = part.box.volume();
    out.push_back(SendPart{received(slot, s.via, part.segment), std::move(part.box), 0, volume});
  }
  return out;
}

std::optional<Located> Storage::landing(std::int32_t slot, const Transfer& t, std::int32_t segment) const {
  const auto& s = t.segments[static_cast<std::size_t>(segment)];
  if (auto dest = shard_holding(view_.ranks[static_cast<std::size_t>(slot)].destinations, s.tensor, s.box))
    return dest;
  const auto it = scratch_.find(key(t.id, segment));
  if (it == scratch_.end()) return std::nullopt;
  return Located{BufferKind::kScratch, 0, Stored{it->second, s.box}};
}

std::optional<Located> Storage::partial_destination(std::int32_t slot, std::uint32_t tensor,
                                                    const Box& box) const {
  for (const auto& d : view_.ranks[static_cast<std::size_t>(slot)].destinations)
    if (d.tensor == tensor && !d.box.contains(box) && intersect(d.box, box))
      return Located{BufferKind::kShard, d.buffer, Stored{0, d.box}};
  return std::nullopt;
}

}  // namespace refit::nccl_detail
