#include "chunk_plan.h"

namespace refit::ucx_detail {
namespace {

std::int64_t chunks_covering(std::int64_t bytes, std::int64_t chunk) { return (bytes + chunk - 1) / chunk; }

}  // namespace

std::optional<std::vector<Run>> direct_runs(const std::vector<SegmentPart>& segments, std::int64_t begin,
                                            std::int64_t end) {
  std::vector<Run> runs;
  const auto most_runs =
      std::max(kMaxRunsPerChunk, static_cast<std::size_t>((end - begin) / kMinMeanRunBytes));
  bool direct = true;
  for_each_segment_piece(segments, begin, end, [&](std::size_t i, std::int64_t lo, std::int64_t hi) {
    const auto& s = segments[i];
    if (!direct || s.maps.size() != 1 || !s.maps[0].covers_segment()) {
      direct = false;
      return;
    }
    s.maps[0].for_each_run(lo, hi, [&](Run r) {
      if (!direct) return;
      r.stream += s.stream - begin;
      if (!runs.empty() && runs.back().region == r.region &&
          runs.back().offset + runs.back().length == r.offset &&
          runs.back().stream + runs.back().length == r.stream) {
        runs.back().length += r.length;
        return;
      }
      direct = runs.size() < most_runs;
      runs.push_back(r);
    });
  });
  if (!direct) return std::nullopt;
  return runs;
}

std::vector<ChunkWait> chunk_waits(const std::vector<SegmentPart>& segments,
                                   const std::vector<std::vector<Contribution>>& contributions,
                                   const std::vector<Receive>& receives, std::int64_t begin,
                                   std::int64_t end) {
  std::vector<ChunkWait> waits;
  const auto need = [&](std::int32_t receive, std::int64_t chunks) {
    auto it = std::ranges::find(waits, receive, &ChunkWait::receive);
    if (it == waits.end())
      waits.push_back(ChunkWait{receive, chunks});
    else
      it->chunks = std::max(it->chunks, chunks);
  };
  for_each_segment_piece(segments, begin, end, [&](std::size_t i, std::int64_t, std::int64_t hi) {
    for (const Contribution& c : contributions[i]) {
      const auto& from = receives[static_cast<std::size_t>(c.receive)];
      // Same box: byte k of the forwarded segment is byte k of the received one, so a chunk
      // leaves as soon as the bytes it carries have landed. Otherwise it waits for the whole.
      const std::int64_t last = c.same_box ? c.stream + hi : c.stream + c.bytes;
      need(c.receive, chunks_covering(last, from.chunk));
    }
  });
  return waits;
}

}  // namespace refit::ucx_detail
