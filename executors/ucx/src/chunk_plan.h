#pragma once
// Per-chunk decisions of a rank program: which chunks move with zero copies (and through which
// runs), and which received chunks a forwarded chunk waits for.
#include <algorithm>
#include <cstdint>
#include <optional>
#include <vector>

#include "rank_program.h"

namespace refit::ucx_detail {

// Calls f(segment index, begin, end) for every segment overlapping message bytes [begin, end),
// with begin/end relative to that segment's first byte, in message order.
template <class F>
void for_each_segment_piece(const std::vector<SegmentPart>& segments, std::int64_t begin, std::int64_t end,
                            F&& f) {
  auto it = std::ranges::upper_bound(segments, begin, {}, &SegmentPart::stream);
  std::size_t i = static_cast<std::size_t>(it - segments.begin());
  i = i == 0 ? 0 : i - 1;
  for (; i < segments.size() && segments[i].stream < end; ++i) {
    const auto& s = segments[i];
    const std::int64_t lo = std::max(begin, s.stream);
    const std::int64_t hi = std::min(end, s.stream + s.bytes);
    if (lo < hi) f(i, lo - s.stream, hi - s.stream);
  }
}

// Runs of message bytes [begin, end), with stream offsets relative to `begin`, merged where they
// continue each other; nullopt when a segment there is not held whole in one place, or when the
// bytes scatter over runs too many and too short (see kMinMeanRunBytes: packing is then cheaper
// than many puts).
std::optional<std::vector<Run>> direct_runs(const std::vector<SegmentPart>& segments, std::int64_t begin,
                                            std::int64_t end);

// Where a forwarded segment's bytes come from: one segment of a message this rank received.
struct Contribution {
  std::int32_t receive = 0;  // index into RankProgram::receives
  std::int64_t stream = 0;   // that segment's offset in its message
  std::int64_t bytes = 0;
  bool same_box = false;  // it is the very box forwarded, so bytes correspond one to one
};

// The received chunks that message bytes [begin, end) of a send wait for, one entry per receive.
// `contributions` is per segment of the send (empty for bytes the rank holds as a source).
std::vector<ChunkWait> chunk_waits(const std::vector<SegmentPart>& segments,
                                   const std::vector<std::vector<Contribution>>& contributions,
                                   const std::vector<Receive>& receives, std::int64_t begin,
                                   std::int64_t end);

}  // namespace refit::ucx_detail
