#pragma once
// What one rank does in a plan, worked out once at prepare from the plan and the rank's buffers:
// where each byte it receives lands, where each byte it sends comes from, which chunks move with
// zero copies, how much staging and scratch it needs, and which received chunks each forwarded
// chunk waits for. Plain data without UCX, so it is tested on its own.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/executor.h"
#include "refit/planner/plan.h"
#include "strided_copy.h"

namespace refit::ucx_detail {

// A chunk moves as one put per contiguous run unless its runs are both many (more than
// kMaxRunsPerChunk) and short (under kMinMeanRunBytes on average): a put costs a fraction of a
// microsecond on top of its bytes, while staging costs two more copies of every byte (pack here,
// unpack there), so only runs much shorter than a page are cheaper packed.
inline constexpr std::size_t kMaxRunsPerChunk = 16;
inline constexpr std::int64_t kMinMeanRunBytes = 4096;

// Registered memory of the rank: the caller's shards, then memory the executor allocates.
struct RegionSpec {
  std::byte* user = nullptr;  // caller memory; nullptr: the executor allocates `bytes`
  std::int64_t bytes = 0;
  bool remote = false;  // peers put into it, so its key is published
};

// One segment of a message on this rank's side: its packed bytes and where they live here.
struct SegmentPart {
  std::int64_t stream = 0;  // offset in the message
  std::int64_t bytes = 0;
  std::uint32_t tensor = 0;
  std::vector<RowMap> maps;  // receive: where the bytes go (none: not needed here);
                             // send: where they come from (together they cover the segment)
};

// A forwarded segment needs the first `chunks` chunks of receives[receive] to have landed.
struct ChunkWait {
  std::int32_t receive = 0;
  std::int64_t chunks = 0;
};

enum class Landing : std::uint8_t {
  kDirect,   // put straight into its final place; nothing to copy on arrival
  kStaged,   // put into a receive-staging slot, unpacked on arrival
  kScratch,  // the message is forwarded: it lands whole in scratch and is copied out on arrival
};

struct Receive {
  std::int32_t transfer = 0;
  Rank peer;
  std::int64_t bytes = 0;
  std::int64_t chunk = 0;  // bytes per chunk
  std::vector<SegmentPart> segments;
  std::int64_t scratch_offset = -1;    // >= 0 when the message lands whole in scratch
  std::vector<Landing> landing;        // per chunk
  std::vector<std::vector<Run>> runs;  // per chunk, direct or scratch: where it lands
  std::int64_t chunk_count() const { return static_cast<std::int64_t>(landing.size()); }
};

struct Send {
  std::int32_t transfer = 0;
  Rank peer;
  std::int64_t bytes = 0;
  std::int64_t chunk = 0;
  std::vector<SegmentPart> segments;
  std::vector<std::vector<Run>> runs;         // per chunk: zero-copy source runs; empty: pack
  std::vector<std::vector<ChunkWait>> waits;  // per chunk: what it forwards must have landed
  std::int64_t chunk_count() const { return static_cast<std::int64_t>(runs.size()); }
};

// Slots of staging memory, each able to hold any chunk that needs one.
struct StagingSlots {
  std::int64_t slot_bytes = 0;
  std::int64_t slots = 0;
};

struct RankProgram {
  Rank rank;
  std::vector<RegionSpec> regions;
  std::uint32_t scratch_region = 0;
  std::uint32_t receive_staging_region = 0;
  std::uint32_t send_staging_region = 0;
  StagingSlots receive_staging;
  StagingSlots send_staging;
  std::vector<Receive> receives;  // plan order
  std::vector<Send> sends;        // plan order
};

// Errors name the tensor and the transfer: a buffer that does not match the plan (missing, too
// small, outside its tensor), data the rank must send but does not hold, or a staging budget
// that cannot hold one chunk.
Result<RankProgram> make_rank_program(const Plan& plan, Rank rank, const RankBuffers& buffers, Bytes staging);

// Bytes of chunk `c` of a message of `bytes` bytes cut into `chunk`-byte chunks: [begin, end).
inline std::int64_t chunk_begin(std::int64_t chunk, std::int64_t c) { return c * chunk; }
inline std::int64_t chunk_end(std::int64_t bytes, std::int64_t chunk, std::int64_t c) {
  return std::min(bytes, (c + 1) * chunk);
}

}  // namespace refit::ucx_detail
