#include "schedule.h"

#include <algorithm>

#include <fmt/format.h>

#include "box_walk.h"

namespace refit::nccl_detail {
namespace {

// Staging used per rank and step, filled first-fit.
class Occupancy {
 public:
  Occupancy(std::int32_t ranks, std::int64_t half)
      : half_(half), used_(static_cast<std::size_t>(ranks)), count_(used_.size()), open_(used_.size(), 0) {}

  // The first step >= `ready` where both ranks have room for `bytes`; takes it.
  std::int32_t place(Rank a, Rank b, std::int32_t ready, std::int64_t bytes) {
    std::int32_t s = std::max({ready, open(a), open(b)});
    while (!fits(a, s, bytes) || !fits(b, s, bytes)) ++s;
    take(a, s, bytes);
    take(b, s, bytes);
    return s;
  }

 private:
  std::int32_t open(Rank r) const { return open_[static_cast<std::size_t>(r.value)]; }
  bool fits(Rank r, std::int32_t s, std::int64_t bytes) const {
    const auto& used = used_[static_cast<std::size_t>(r.value)];
    const auto& count = count_[static_cast<std::size_t>(r.value)];
    const auto i = static_cast<std::size_t>(s);
    return i >= used.size() || (used[i] + bytes <= half_ && count[i] < kMaxChunksPerStep);
  }
  void take(Rank r, std::int32_t s, std::int64_t bytes) {
    const auto k = static_cast<std::size_t>(r.value);
    auto& used = used_[k];
    auto& count = count_[k];
    if (used.size() <= static_cast<std::size_t>(s)) {
      used.resize(static_cast<std::size_t>(s) + 1, 0);
      count.resize(used.size(), 0);
    }
    used[static_cast<std::size_t>(s)] += bytes;
    ++count[static_cast<std::size_t>(s)];
    // Steps before open_ cannot take even the smallest chunk.
    while (static_cast<std::size_t>(open_[k]) < used.size() && !fits(r, open_[k], kAlign)) ++open_[k];
  }

  std::int64_t half_;
  std::vector<std::vector<std::int64_t>> used_;
  std::vector<std::vector<std::int32_t>> count_;
  std::vector<std::int32_t> open_;
};

// The latest step among the chunks of upstream transfers that delivered what chunk `k` of `t`
// forwards: for each part, the upstream chunk holding its last byte (steps rise with chunks).
Result<std::int64_t> upstream_step(const Plan& plan, const RelayIndex& relays, const Schedule& s,
                                   const Transfer& t, std::int64_t k) {
  std::int64_t latest = kNoUpstream;
  const auto& layout = s.layouts[static_cast<std::size_t>(t.id)];
  for (const auto& piece : layout.pieces(k)) {
    const auto& seg = t.segments[static_cast<std::size_t>(piece.segment)];
    if (seg.via == kFromSourceShard) continue;
    auto parts = relays.parts(seg, piece.first, piece.count);
    if (!parts)
      return std::unexpected(std::move(parts.error()).in(fmt::format("segments[{}]", piece.segment)));
    const auto v = static_cast<std::size_t>(seg.via);
    const auto& up = plan.transfers[v];
    for (const auto& part : *parts) {
      const auto& u = up.segments[static_cast<std::size_t>(part.segment)];
      Shape last = part.box.offset;
      for (std::size_t d = 0; d < last.size(); ++d) last[d] += part.box.extent[d] - 1;
      const std::int64_t byte = s.layouts[v].segment_offset(part.segment) +
                                (row_major_index(u.box, last) + 1) * s.layouts[v].element_size(part.segment) -
                                1;
      latest =
          std::max<std::int64_t>(latest, s.step[v][static_cast<std::size_t>(s.layouts[v].chunk_of(byte))]);
    }
  }
  return latest;
}

}  // namespace

Result<Schedule> make_schedule(const Plan& plan, const RelayIndex& relays, Bytes staging) {
  Schedule s;
  s.half = staging.value / 2 / kAlign * kAlign;
  if (s.half < kAlign)
    return invalid(
        fmt::format("staging of {} bytes is below the {} bytes one chunk needs", staging.value, 2 * kAlign));
  Occupancy occupancy(plan.world_size(), s.half);
  for (const auto& t : plan.transfers) {
    const std::int64_t max_chunk = std::max(kAlign, std::min(t.chunk.value / kAlign * kAlign, s.half));
    s.layouts.emplace_back(plan, t, max_chunk);
    const auto& layout = s.layouts.back();
    auto& steps = s.step.emplace_back();
    auto& upstream = s.upstream.emplace_back();
    for (std::int64_t k = 0; k < layout.chunks(); ++k) {
      auto latest = upstream_step(plan, relays, s, t, k);
      if (!latest) return std::unexpected(std::move(latest.error()).in(fmt::format("transfers[{}]", t.id)));
      const auto ready = static_cast<std::int32_t>(std::max<std::int64_t>(*latest + 1, k ? steps.back() : 0));
      steps.push_back(occupancy.place(t.sender, t.receiver, ready, align_up(layout.chunk_bytes(k))));
      upstream.push_back(static_cast<std::int32_t>(*latest));
      s.steps = std::max(s.steps, steps.back() + 1);
    }
  }
  return s;
}

}  // namespace refit::nccl_detail
