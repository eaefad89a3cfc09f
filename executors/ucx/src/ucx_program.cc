#include "ucx_program.h"

#include <unordered_map>

#include "refit/core/try.h"
#include "refit/executors/rank_buffers.h"

namespace refit::ucx_detail {
namespace {

class Builder {
 public:
  Builder(UcxProgram& program, const RankBuffers& buffers) : p_(program) {
    const auto sources = side_buffers(buffers, true);
    const auto destinations = side_buffers(buffers, false);
    for (const auto& b : sources)
      p_.regions.push_back({.user = b.data(), .bytes = static_cast<std::int64_t>(b.size()), .remote = false});
    for (const auto& b : destinations)
      p_.regions.push_back({.user = b.data(), .bytes = static_cast<std::int64_t>(b.size()), .remote = true});
    sources_ = sources.size();
    p_.source_buffers = sources.size();
    p_.destination_buffers = destinations.size();
    const auto next = static_cast<std::uint32_t>(p_.regions.size());
    p_.scratch_region = next;
    p_.receive_staging_region = next + 1;
    p_.send_staging_region = next + 2;
    p_.regions.push_back({.user = nullptr, .bytes = p_.rank->scratch().value, .remote = true});
    p_.regions.push_back({.user = nullptr, .bytes = 0, .remote = true});
    p_.regions.push_back({.user = nullptr, .bytes = 0, .remote = false});
  }

  void build(Bytes staging) {
    const auto& rank = *p_.rank;
    std::unordered_map<std::int32_t, std::int32_t> receive_of;  // transfer -> index in receives
    for (std::size_t i = 0; i < rank.receives().size(); ++i) {
      const auto& r = rank.receives()[i];
      receive_of[r.transfer] = static_cast<std::int32_t>(i);
      auto& runs = p_.receive_runs.emplace_back(r.chunks.size());
      for (std::size_t k = 0; k < r.chunks.size(); ++k)
        if (r.chunks[k].path == lowering::CopyPath::kInPlace)
          runs[k] = regions_of(rank.runs(r, static_cast<std::int64_t>(k)));
    }
    for (std::size_t i = 0; i < rank.quantize_steps().size(); ++i)
      receive_of[rank.quantize_steps()[i].transfer] = static_cast<std::int32_t>(rank.receives().size() + i);
    const auto by_receive = [&](const std::vector<lowering::ChunkWait>& waits) {
      std::vector<ChunkWait> out;
      for (const auto& w : waits)
        out.push_back(ChunkWait{.receive = receive_of.at(w.transfer), .chunks = w.chunks});
      return out;
    };
    for (const auto& step : rank.quantize_steps()) p_.step_waits.push_back(by_receive(step.waits));
    for (const auto& s : rank.sends()) {
      auto& runs = p_.send_runs.emplace_back(s.chunks.size());
      auto& waits = p_.waits.emplace_back(s.chunks.size());
      for (std::size_t k = 0; k < s.chunks.size(); ++k) {
        if (s.chunks[k].path == lowering::CopyPath::kInPlace)
          runs[k] = regions_of(rank.runs(s, static_cast<std::int64_t>(k)));
        waits[k] = by_receive(s.waits[k]);
      }
    }
    size_staging(staging);
  }

 private:
  std::uint32_t region_of(lowering::BufferKind kind, std::int32_t index) const {
    switch (kind) {
      case lowering::BufferKind::kSource:
        return static_cast<std::uint32_t>(index);
      case lowering::BufferKind::kDestination:
        return static_cast<std::uint32_t>(sources_) + static_cast<std::uint32_t>(index);
      case lowering::BufferKind::kScratch:
        return p_.scratch_region;
      case lowering::BufferKind::kStaging:
        break;
    }
    return p_.send_staging_region;
  }

  std::vector<Run> regions_of(const std::vector<lowering::Run>& runs) const {
    std::vector<Run> out;
    out.reserve(runs.size());
    for (const auto& r : runs)
      out.push_back(Run{
          .stream = r.stream, .region = region_of(r.kind, r.index), .offset = r.offset, .length = r.length});
    return out;
  }

  // Staging is split between receive slots and pack slots when both are needed; a chunk is at
  // most half the staging (the chunk rule), so each half holds at least one.
  void size_staging(Bytes staging) {
    const auto& recv = p_.rank->receive_staging();
    const auto& send = p_.rank->send_staging();
    const bool both = recv.chunks > 0 && send.chunks > 0;
    const std::int64_t budget = both ? staging.value / 2 : staging.value;
    const auto slots = [&](const lowering::StagingDemand& d, StagingSlots& out, std::uint32_t region) {
      if (d.chunks == 0) return;
      out =
          StagingSlots{.slot_bytes = d.largest.value, .slots = std::min(d.chunks, budget / d.largest.value)};
      p_.regions[region].bytes = out.slot_bytes * out.slots;
    };
    slots(recv, p_.receive_staging, p_.receive_staging_region);
    slots(send, p_.send_staging, p_.send_staging_region);
  }

  UcxProgram& p_;
  std::size_t sources_ = 0;
};

}  // namespace

lowering::HostBuffers UcxProgram::host(std::span<std::byte* const> bases) const {
  return lowering::HostBuffers{.sources = bases.subspan(0, source_buffers),
                               .destinations = bases.subspan(source_buffers, destination_buffers),
                               .scratch = bases[scratch_region]};
}

Result<UcxProgram> make_ucx_program(std::unique_ptr<lowering::LoweredPlan> lowered, Rank rank,
                                    const RankBuffers& buffers, const ZeroCopyRule& rule) {
  auto shards = REFIT_TRY(check_rank_buffers(lowered->plan(), rank, buffers, MemoryKind::kHost));
  const Bytes staging = lowered->staging();
  UcxProgram program;
  program.lowered = std::move(lowered);
  program.rank.emplace(REFIT_TRY(lowering::lower_rank(*program.lowered, rank, std::move(shards), rule)));
  Builder builder(program, buffers);
  builder.build(staging);
  return program;
}

}  // namespace refit::ucx_detail
