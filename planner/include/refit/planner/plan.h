#pragma once
// The Plan IR: which bytes move from which rank to which rank, over which kind of link, in what
// order, and which transfers wait on which. A Plan is plain data: every strategy produces it,
// every executor runs it, and it round-trips through JSON.
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "refit/core/box.h"
#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/core/tensor_spec.h"
#include "refit/core/units.h"
#include "refit/planner/execution_model.h"

namespace refit {

struct Overlap;

enum class LinkKind : std::uint8_t {
  kNvlink,   // both ranks' GPUs are in one NVLink domain
  kNetwork,  // through the sender's and the receiver's NICs
  kLocal,    // both ranks are on the same GPU: a device copy
};
// How plan files and reports spell each link kind, indexed by LinkKind; and how many there are,
// for arrays indexed by LinkKind.
inline constexpr std::array<std::string_view, 3> kLinkKindNames{"nvlink", "network", "local"};
inline constexpr std::size_t kLinkKinds = kLinkKindNames.size();
std::string_view link_kind_name(LinkKind k);
[[nodiscard]] Result<LinkKind> parse_link_kind(std::string_view name);

inline constexpr std::int32_t kFromSourceShard = -1;

// One box of one tensor inside a message. Segments are packed back to back in message order.
struct Segment {
  std::uint32_t tensor = 0;             // index into Plan::tensors
  Box box;                              // global coordinates, never empty
  std::int32_t via = kFromSourceShard;  // transfer that delivered this box to the sender, or
                                        // kFromSourceShard when the sender holds it as a source
  bool operator==(const Segment&) const = default;
};

struct Transfer {
  std::int32_t id = 0;  // == index in Plan::transfers
  Rank sender;
  Rank receiver;
  LinkKind link = LinkKind::kNetwork;
  std::vector<Segment> segments;
  Bytes bytes;  // sum of the segments' bytes
  Bytes chunk;  // relays forward chunk by chunk: a segment can leave once its bytes have arrived
                // (the lowering cuts the message into chunks of at most this size)
  bool operator==(const Transfer&) const = default;

  // Distinct transfers this one forwards data from, in ascending order.
  std::vector<std::int32_t> upstream() const;
  // A quantize step (FP8 at the landing ranks, core/quantization.h): a transfer from a rank to
  // itself, over kLocal, in which the rank quantizes its box of weights it holds in their source
  // dtype into their fp8 values and scales. Its values segments name, as `via`, the transfers
  // that brought the weight's landing copy (a via across tensors, the only one a plan has); its
  // scales segments are made there (kFromSourceShard). It runs once all those transfers have
  // landed, and relays of the fp8 forward from it like from any transfer.
  bool quantizes() const { return sender == receiver; }
};

struct Plan {
  std::string strategy;                                      // the StrategyInfo::name it was made by
  ExecutionModelId execution = ExecutionModelId::kRefitUcx;  // what its executors are
  std::vector<TensorSpec> tensors;                           // same order as the problem's tensors
  std::int32_t source_ranks = 0;
  std::int32_t destination_ranks = 0;
  // Plan order: a transfer only forwards data of transfers that come before it, so the order
  // is a valid execution order and dependencies are acyclic by construction (validate checks).
  std::vector<Transfer> transfers;
  bool operator==(const Plan&) const = default;

  std::int32_t world_size() const { return source_ranks + destination_ranks; }
  // The same strategy, execution model, tensors and ranks with no transfers: where a plan derived
  // from this one (a subset of it, a repair, the part a call schedule runs) starts.
  Plan without_transfers() const {
    return Plan{.strategy = strategy,
                .execution = execution,
                .tensors = tensors,
                .source_ranks = source_ranks,
                .destination_ranks = destination_ranks,
                .transfers = {}};
  }
  Bytes segment_bytes(const Segment& s) const {
    return Bytes{s.box.volume() * dtype_size(tensors[s.tensor].dtype)};
  }
};

// Per-rank ordered view for executors: indices into Plan::transfers, in plan order.
struct RankSchedule {
  std::vector<std::int32_t> sends;
  std::vector<std::int32_t> receives;
};
std::vector<RankSchedule> schedules(const Plan& plan);

// The rules that need the plan alone, which every executor's prepare and the simulator check
// before indexing by the plan: transfer ids in order, ranks in the world and distinct (but in a
// quantize step over kLocal of tensors made at landing ranks), segments
// non-empty and inside their tensor (of 1 to 8 dims), bytes adding up, chunks > 0, and every `via`
// an earlier transfer received by the sender; sizes within the caps of checked.h (ranks, tensor
// elements, bytes, and check_chunk_count). Errors name the transfer and segment.
[[nodiscard]] Result<void> validate_structure(const Plan& plan);

// A chunk size in (0, limits::kMaxBytes]; the error says so and gives the size.
[[nodiscard]] Result<void> check_chunk(Bytes chunk);
// The plan cuts its transfers into at most limits::kMaxChunks chunks (ceil(bytes / chunk) each);
// the error names the chunk size, which is what a user changes.
[[nodiscard]] Result<void> check_chunk_count(const Plan& plan);
// A limit of `max_chunks` checked before planning `problem`, whose tensors overlap as `overlaps`
// (one per tensor): every destination rank of a tensor that is not quantized in flight receives its
// whole shard in transfers, so any plan has at least the sum of floor(shard bytes / chunk) over
// those ranks. Refusing here costs microseconds where planning first (millions of transfers) cost
// seconds and gigabytes.
[[nodiscard]] Result<void> check_chunk_count(const ReshardProblem& problem, std::span<const Overlap> overlaps,
                                             Bytes chunk, std::int64_t max_chunks);

// Checks, naming the transfer, segment and rank at fault:
//  - tensors match the problem; ranks exist; boxes lie inside their tensor; bytes add up;
//  - every sender holds what it sends: a source shard containing the box, or an earlier
//    transfer it received (`via`) whose segments of the same tensor tile the box; fp8 values and
//    scales made at landing ranks come from a quantize step, whose values segments are tiled by
//    their `via`'s segments of the weight's landing copy and whose scales segments scale blocks
//    whose values the same step makes;
//  - every destination element is written exactly once: the segments a destination rank
//    receives, cut to its own box, tile that box without overlap or gap.
[[nodiscard]] Result<void> validate(const Plan& plan, const ReshardProblem& problem);

// A stable 64-bit digest of everything in the plan, printed as 16 hex digits.
std::uint64_t plan_hash(const Plan& plan);
std::string plan_hash_hex(const Plan& plan);

}  // namespace refit
