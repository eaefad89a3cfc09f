#include "rank_program.h"

#include <unordered_map>
#include <unordered_set>

#include <fmt/format.h>

#include "buffer_checks.h"
#include "chunk_plan.h"

namespace refit::ucx_detail {
namespace {

constexpr std::int64_t kScratchAlignment = 64;

std::int64_t chunk_bytes(const Transfer& t) {
  return t.chunk.value > 0 ? std::min(t.chunk.value, t.bytes.value) : t.bytes.value;
}

// Counts the chunks that need a staging slot and the largest of them.
struct SlotDemand {
  std::int64_t chunks = 0;
  std::int64_t largest = 0;
  void add(std::int64_t bytes) {
    ++chunks;
    largest = std::max(largest, bytes);
  }
};

class Builder {
 public:
  Builder(const Plan& plan, Rank rank, const RankBuffers& buffers)
      : plan_(plan), rank_(rank), buffers_(buffers) {
    for (const auto& b : buffers.sources)
      program_.regions.push_back({b.bytes.data(), static_cast<std::int64_t>(b.bytes.size()), false});
    for (const auto& b : buffers.destinations)
      program_.regions.push_back({b.bytes.data(), static_cast<std::int64_t>(b.bytes.size()), true});
    const auto next = static_cast<std::uint32_t>(program_.regions.size());
    program_.scratch_region = next;
    program_.receive_staging_region = next + 1;
    program_.send_staging_region = next + 2;
    program_.regions.resize(program_.regions.size() + 3);
    program_.regions[next].remote = true;
    program_.regions[next + 1].remote = true;
    program_.rank = rank;
  }

  Result<RankProgram> build(Bytes staging) && {
    const auto forwarded = forwarded_transfers();
    for (const auto& t : plan_.transfers)
      if (t.receiver == rank_) add_receive(t, forwarded.contains(t.id));
    for (const auto& t : plan_.transfers)
      if (t.sender == rank_)
        if (auto ok = add_send(t); !ok)
          return std::unexpected(std::move(ok.error()).in(fmt::format("transfer {}", t.id)));
    program_.regions[program_.scratch_region].bytes = scratch_bytes_;
    if (auto ok = size_staging(staging); !ok) return std::unexpected(ok.error());
    return std::move(program_);
  }

 private:
  std::unordered_set<std::int32_t> forwarded_transfers() const {
    std::unordered_set<std::int32_t> out;
    for (const auto& t : plan_.transfers)
      if (t.sender == rank_)
        for (const auto& s : t.segments)
          if (s.via != kFromSourceShard) out.insert(s.via);
    return out;
  }

  std::int64_t element_size(std::uint32_t tensor) const { return dtype_size(plan_.tensors[tensor].dtype); }
  std::uint32_t destination_region(std::size_t i) const {
    return static_cast<std::uint32_t>(buffers_.sources.size() + i);
  }

  void add_receive(const Transfer& t, bool forwarded) {
    Receive r{t.id, t.sender, t.bytes.value, chunk_bytes(t), {}, -1, {}, {}};
    bool whole_in_destination = true;
    std::int64_t stream = 0;
    for (const auto& seg : t.segments) {
      SegmentPart part{stream, plan_.segment_bytes(seg).value, seg.tensor, {}};
      const auto d = buffer_of(buffers_.destinations, seg.tensor);
      const Box* box = d ? &buffers_.destinations[*d].box : nullptr;
      if (const auto clip = box ? intersect(seg.box, *box) : std::nullopt)
        part.maps.emplace_back(seg.box, View{destination_region(*d), 0, *box, element_size(seg.tensor)},
                               *clip);
      whole_in_destination = whole_in_destination && box && box->contains(seg.box);
      stream += part.bytes;
      r.segments.push_back(std::move(part));
    }
    // A forwarded message must stay whole until it has been forwarded; the destination buffer
    // can serve only if it holds every segment.
    if (forwarded && !whole_in_destination) {
      r.scratch_offset = scratch_bytes_;
      scratch_bytes_ += (r.bytes + kScratchAlignment - 1) / kScratchAlignment * kScratchAlignment;
    }
    plan_landings(r);
    receive_index_[t.id] = static_cast<std::int32_t>(program_.receives.size());
    program_.receives.push_back(std::move(r));
  }

  void plan_landings(Receive& r) {
    for (std::int64_t begin = 0; begin < r.bytes; begin += r.chunk) {
      const std::int64_t end = std::min(r.bytes, begin + r.chunk);
      if (r.scratch_offset >= 0) {
        r.landing.push_back(Landing::kScratch);
        r.runs.push_back({Run{0, program_.scratch_region, r.scratch_offset + begin, end - begin}});
      } else if (auto runs = direct_runs(r.segments, begin, end)) {
        r.landing.push_back(Landing::kDirect);
        r.runs.push_back(std::move(*runs));
      } else {
        r.landing.push_back(Landing::kStaged);
        r.runs.emplace_back();
        receive_slots_.add(end - begin);
      }
    }
  }

  Result<void> add_send(const Transfer& t) {
    Send s{t.id, t.receiver, t.bytes.value, chunk_bytes(t), {}, {}, {}};
    std::vector<std::vector<Contribution>> contributions;
    std::int64_t stream = 0;
    for (const auto& seg : t.segments) {
      SegmentPart part{stream, plan_.segment_bytes(seg).value, seg.tensor, {}};
      contributions.emplace_back();
      auto ok =
          seg.via == kFromSourceShard ? from_source(seg, part) : forwarded(seg, part, contributions.back());
      if (!ok)
        return std::unexpected(
            std::move(ok.error())
                .in(fmt::format("tensor '{}' box {}", plan_.tensors[seg.tensor].name, seg.box.to_string())));
      stream += part.bytes;
      s.segments.push_back(std::move(part));
    }
    for (std::int64_t begin = 0; begin < s.bytes; begin += s.chunk) {
      const std::int64_t end = std::min(s.bytes, begin + s.chunk);
      auto runs = direct_runs(s.segments, begin, end);
      if (!runs) send_slots_.add(end - begin);
      s.runs.push_back(runs.value_or(std::vector<Run>{}));
      s.waits.push_back(chunk_waits(s.segments, contributions, program_.receives, begin, end));
    }
    program_.sends.push_back(std::move(s));
    return {};
  }

  Result<void> from_source(const Segment& seg, SegmentPart& part) const {
    const auto i = buffer_of(buffers_.sources, seg.tensor);
    if (!i || !buffers_.sources[*i].box.contains(seg.box))
      return invalid("this rank sends it as a source but has no source buffer holding it");
    const Box& box = buffers_.sources[*i].box;
    part.maps.emplace_back(seg.box, View{static_cast<std::uint32_t>(*i), 0, box, element_size(seg.tensor)},
                           seg.box);
    return {};
  }

  Result<void> forwarded(const Segment& seg, SegmentPart& part, std::vector<Contribution>& from) const {
    const auto it = receive_index_.find(seg.via);
    if (it == receive_index_.end())
      return invalid(fmt::format("it forwards transfer {}, which this rank does not receive", seg.via));
    const Receive& r = program_.receives[static_cast<std::size_t>(it->second)];
    const Transfer& u = plan_.transfers[static_cast<std::size_t>(seg.via)];
    std::int64_t covered = 0;
    for (std::size_t k = 0; k < u.segments.size(); ++k) {
      const Segment& useg = u.segments[k];
      const auto clip = useg.tensor == seg.tensor ? intersect(seg.box, useg.box) : std::nullopt;
      if (!clip) continue;
      auto view = held(r, k, useg);
      if (!view) return std::unexpected(view.error());
      part.maps.emplace_back(seg.box, *view, *clip);
      from.push_back(
          Contribution{it->second, r.segments[k].stream, r.segments[k].bytes, useg.box == seg.box});
      covered += clip->volume();
    }
    if (covered != seg.box.volume())
      return invalid(
          fmt::format("transfer {} delivers only {} of its {} elements", seg.via, covered, seg.box.volume()));
    return {};
  }

  // Where segment k of a received message stays after landing, so that it can be forwarded.
  Result<View> held(const Receive& r, std::size_t k, const Segment& useg) const {
    const auto elem = element_size(useg.tensor);
    if (r.scratch_offset >= 0)
      return View{program_.scratch_region, r.scratch_offset + r.segments[k].stream, useg.box, elem};
    const auto d = buffer_of(buffers_.destinations, useg.tensor);
    if (!d || !buffers_.destinations[*d].box.contains(useg.box))
      return invalid(fmt::format("transfer {} brings {} but this rank does not keep it", r.transfer,
                                 useg.box.to_string()));
    return View{destination_region(*d), 0, buffers_.destinations[*d].box, elem};
  }

  // Staging is split between receive slots and pack slots when both are needed.
  Result<void> size_staging(Bytes staging) {
    const bool both = receive_slots_.chunks > 0 && send_slots_.chunks > 0;
    const std::int64_t budget = both ? staging.value / 2 : staging.value;
    auto slots = [&](const SlotDemand& d, StagingSlots& out, std::uint32_t region) -> Result<void> {
      if (d.chunks == 0) return {};
      if (budget < d.largest)
        return invalid(fmt::format("staging of {} bytes{} cannot hold one chunk of {} bytes", staging.value,
                                   both ? " (half for receiving, half for packing)" : "", d.largest));
      out = StagingSlots{d.largest, std::min(d.chunks, budget / d.largest)};
      program_.regions[region].bytes = out.slot_bytes * out.slots;
      return {};
    };
    if (auto ok = slots(receive_slots_, program_.receive_staging, program_.receive_staging_region); !ok)
      return ok;
    return slots(send_slots_, program_.send_staging, program_.send_staging_region);
  }

  const Plan& plan_;
  Rank rank_;
  const RankBuffers& buffers_;
  RankProgram program_;
  std::unordered_map<std::int32_t, std::int32_t> receive_index_;
  std::int64_t scratch_bytes_ = 0;
  SlotDemand receive_slots_;
  SlotDemand send_slots_;
};

}  // namespace

Result<RankProgram> make_rank_program(const Plan& plan, Rank rank, const RankBuffers& buffers,
                                      Bytes staging) {
  if (auto ok = check_buffers(plan, rank, buffers); !ok) return std::unexpected(ok.error());
  if (staging.value <= 0) return invalid(fmt::format("staging must be > 0 bytes, got {}", staging.value));
  return Builder(plan, rank, buffers).build(staging);
}

}  // namespace refit::ucx_detail
