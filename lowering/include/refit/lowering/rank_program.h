#pragma once
// One rank's part of a lowered plan: where every byte it sends is read from and every byte it
// receives lands (its shards, scratch or staging), which chunks move in place and which are
// packed or unpacked (and why), what its forwarding chunks wait for, and how much scratch and
// staging it needs. Plain data without a transport: the UCX and NCCL executors run it,
// `refit plan --explain` prints it, and the simulator costs the very same decisions
// (plan_costs.h).
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/quantization.h"
#include "refit/lowering/arrays.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/planner/execution_model.h"

namespace refit::lowering {

// Part of a shard's box inside one of the side's buffers when those are a framework's
// parameters (models/storage_map.h): a fused [q; k; v] or [gate; up] weight, stacked experts,
// a padded vocab. The region is strided, so a piece of it is read and written where it lies.
struct Region {
  Box box;                  // global coordinates; inside the shard's box
  std::int32_t buffer = 0;  // which of the side's buffers
  std::int64_t offset = 0;  // bytes from the buffer's start to the box's first element
  Shape strides;            // elements between neighbours along each dim of the box
  bool operator==(const Region&) const = default;
};

// A rank's box of a tensor. Without regions it is stored row-major and contiguous in a buffer of
// its own: the side's buffer number i is its shard number i. With regions, these tile the box
// (every element in exactly one) and the side's buffers are the parameters they point into.
struct Shard {
  std::uint32_t tensor = 0;  // index into Plan::tensors
  Box box;
  std::vector<Region> regions;
  bool operator==(const Shard&) const = default;
};

// What a rank holds before (sources) and must hold after (destinations) the refit.
struct RankShards {
  std::vector<Shard> sources;
  std::vector<Shard> destinations;
};

// The rank's non-empty boxes of the problem's tensors, in problem order: the buffers `refit run`
// allocates, and what the simulator assumes.
RankShards shards_of(const ReshardProblem& problem, Rank rank);

enum class BufferKind : std::uint8_t {
  kSource,       // the rank's source shard `index`
  kDestination,  // the rank's destination shard `index`
  kScratch,      // executor memory for forwarded data that lies outside the rank's own boxes
  kStaging,      // executor memory for chunks packed before sending or unpacked after landing
};

// An array of some box in one of the rank's buffers.
struct Located {
  BufferKind kind = BufferKind::kSource;
  std::int32_t index = 0;  // the shard, for kSource and kDestination
  Array array;
};

// Where a rank keeps the segments it receives in order to forward them, by transfer: one flat
// array in landing order and where each transfer's segments start in it. Transfers land in plan
// order, so the starts are sorted as they come and found by binary search (a hash map of vectors
// cost a node and an allocation per forwarded transfer, for every rank the simulator costs).
class ReceivedSegments {
 public:
  // Keeps where the next segment of `transfer` stays. Preconditions: transfers come in
  // increasing order, each one's segments in order.
  void keep(std::int32_t transfer, const Located& where);
  // Where segment `segment` of `transfer` stays; null when it was not kept.
  const Located* find(std::int32_t transfer, std::int32_t segment) const;

 private:
  struct Start {
    std::int32_t transfer = 0;
    std::size_t first = 0;  // index in kept_ of its first segment
  };
  std::vector<Start> starts_;  // increasing transfer
  std::vector<Located> kept_;
};

enum class CopyPath : std::uint8_t {
  kInPlace,  // sent from, or received into, its final place: one transport operation per run
  kStaged,   // packed into staging before it is sent, or unpacked out of staging after it lands
};

enum class CopyReason : std::uint8_t {
  kOneRun,         // the chunk is one contiguous run of one buffer
  kFewRuns,        // at most ZeroCopyRule::max_runs runs
  kLongRuns,       // runs of at least ZeroCopyRule::min_mean_run bytes on average
  kScattered,      // too many short runs: packing costs less than a transport operation each
  kNotInOnePlace,  // some segment is not held whole in one array on this side (gathered from
                   // several received segments, or landing only partly in the rank's boxes)
};
// How many reasons there are: the last one's index + 1.
inline constexpr std::size_t kCopyReasons = static_cast<std::size_t>(CopyReason::kNotInOnePlace) + 1;
std::string_view copy_reason_text(CopyReason reason);

// How one chunk moves on one side.
struct ChunkCopy {
  CopyPath path = CopyPath::kInPlace;
  CopyReason why = CopyReason::kOneRun;
  std::int64_t runs = 0;   // contiguous runs on this side (0 when not in one place)
  std::int64_t bytes = 0;  // the chunk's bytes
};

// Where a received segment lands.
struct SegmentLanding {
  // The destination shard holding all of it, or scratch when a later transfer forwards it and no
  // destination shard holds it; nothing: it lands in staging only.
  std::optional<Located> in_place;
  // Arrays of destination shards holding parts of it (not `in_place`): a shard that holds only
  // part of it, or the regions it spans; each part is copied there from where the segment arrived.
  std::vector<Located> partial;
};

// A contiguous run of a chunk in one buffer.
struct Run {
  std::int64_t stream = 0;  // offset in the chunk
  BufferKind kind = BufferKind::kSource;
  std::int32_t index = 0;
  std::int64_t offset = 0;  // in the buffer
  std::int64_t length = 0;
  bool operator==(const Run&) const = default;
};

// Elements [first, first + count) of `box` (row-major in it), read from `from`.
struct SourcePart {
  Located from;
  Box box;
  std::int64_t first = 0;
  std::int64_t count = 0;
};

struct Receive {
  std::int32_t transfer = 0;
  Rank peer;
  std::vector<SegmentLanding> segments;  // per segment of the transfer
  std::vector<ChunkCopy> chunks;
  bool extracts = false;  // some segment lands partly in a destination shard (copied after landing)
};

struct Send {
  std::int32_t transfer = 0;
  Rank peer;
  // Per segment: the array it is read from; nothing when it is gathered from several received
  // segments or several regions of the source shard (source_parts() gives them).
  std::vector<std::optional<Located>> segments;
  std::vector<ChunkCopy> chunks;
  std::vector<std::vector<ChunkWait>> waits;  // per chunk
};

// Blocks of one weight a quantize step makes (plan.h, Transfer::quantizes), read from and written
// to the rank's destination shards, each row-major in a buffer of its own.
struct QuantizeBlocks {
  QuantScheme scheme = QuantScheme::kFp8Block128;
  std::int32_t copy = 0;    // destination shard of the weight's landing copy (its source dtype)
  std::int32_t values = 0;  // destination shard of its fp8 values
  std::int32_t scales = 0;  // destination shard of its scales
  Box blocks;               // the weight's elements: whole blocks, the last ones to its edge
  Box scale_box;            // their scales
  // Where `blocks` lie in the copy's buffer: the first element, in elements, and the strides.
  std::int64_t copy_offset = 0;
  Shape copy_strides;
  // The values and scales are all of the rank's boxes of them, so the quantizer writes them in
  // place row-major; otherwise they are a part of those boxes.
  bool whole_boxes = false;
};

// A quantize step of the rank: it runs once every chunk in `waits` has landed, after which the
// step's own chunks count as landed for whatever forwards from it.
struct QuantizeStep {
  std::int32_t transfer = 0;
  std::vector<QuantizeBlocks> blocks;  // one per scales segment of the step
  std::vector<ChunkWait> waits;
};

// Chunks of one side that go through staging, and the largest of them.
struct StagingDemand {
  std::int64_t chunks = 0;
  Bytes largest;
};

class RankProgram {
 public:
  RankProgram(RankProgram&&) = default;
  RankProgram& operator=(RankProgram&&) = default;
  RankProgram(const RankProgram&) = delete;  // Located arrays point into its own shards
  RankProgram& operator=(const RankProgram&) = delete;

  const LoweredPlan& lowered() const { return *lowered_; }
  Rank rank() const { return rank_; }
  const RankShards& shards() const { return shards_; }
  const ZeroCopyRule& zero_copy() const { return rule_; }
  const std::vector<Receive>& receives() const { return receives_; }  // plan order
  const std::vector<Send>& sends() const { return sends_; }           // plan order
  // The rank's quantize steps, which are neither receives nor sends (plan order).
  const std::vector<QuantizeStep>& quantize_steps() const { return steps_; }
  Bytes scratch() const { return scratch_; }
  const StagingDemand& receive_staging() const { return receive_staging_; }
  const StagingDemand& send_staging() const { return send_staging_; }

  // The runs of an in-place chunk, in chunk order, merged where they continue each other.
  std::vector<Run> runs(const Receive& r, std::int64_t chunk) const;
  std::vector<Run> runs(const Send& s, std::int64_t chunk) const;
  // What piece `p` of a send is read from: one part, or one per received segment or source
  // shard region it gathers.
  [[nodiscard]] Result<std::vector<SourcePart>> source_parts(const Send& s, const Piece& p) const;

 private:
  friend Result<RankProgram> lower_rank(const LoweredPlan&, Rank, RankShards, const ZeroCopyRule&);
  RankProgram(const LoweredPlan& lowered, Rank rank, RankShards shards, const ZeroCopyRule& rule)
      : lowered_(&lowered), rank_(rank), shards_(std::move(shards)), rule_(rule) {}

  const LoweredPlan* lowered_;
  Rank rank_;
  RankShards shards_;
  ZeroCopyRule rule_;
  std::vector<Receive> receives_;
  std::vector<Send> sends_;
  std::vector<QuantizeStep> steps_;
  ReceivedSegments received_;
  std::vector<std::int32_t> source_shard_;  // by tensor: index in shards_.sources, or -1
  Bytes scratch_;
  StagingDemand receive_staging_;
  StagingDemand send_staging_;
};

// Errors name the transfer, segment and tensor: a shard that is not in the plan's tensors or not
// inside one, a second shard of a tensor on one side, regions that do not tile their shard,
// data the rank sends but does not hold, a quantize step whose shards are missing, are a
// framework's regions or do not hold its blocks.
// Preconditions: `lowered` outlives the program.
[[nodiscard]] Result<RankProgram> lower_rank(const LoweredPlan& lowered, Rank rank, RankShards shards,
                                             const ZeroCopyRule& rule);

}  // namespace refit::lowering
