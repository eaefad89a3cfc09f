#pragma once
// Elastic refit, planning side: a refit over a subset of the destination engines (the others keep
// their weights), and an engine that joins or restarts filled from live engines, from the
// training ranks, or both. Engines are what vLLM's `engines=N` makes: the destination ranks cut
// into N equal blocks of consecutive ranks, each holding a full copy of the weights, so a tensor's
// destination mesh separates them along its first axis (docs/guide/elastic-planning.md).
#include <cstdint>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/topology/rank_map.h"

namespace refit {

// Which engines a refit covers: plain data, the same on every rank.
struct MemberEngines {
  std::int32_t engines = 1;           // the destination ranks form this many engines of equal size
  std::vector<std::int32_t> members;  // the engines this refit fills, ascending and distinct
};

// Refuses (kUnsupported), naming the tensor and `what`, weights quantized at landing ranks: one
// engine's landing rank makes their fp8 in a quantize step, so a plan over some engines (a
// membership, a join, the repair of an elastic step) cannot take them from any other holder.
[[nodiscard]] Result<void> check_no_landing(const ReshardProblem& problem, std::string_view what);

// Engine count dividing the destination ranks, members in [0, engines), ascending, distinct and
// not none; errors name the engine index or the count.
[[nodiscard]] Result<void> check_member_engines(const MemberEngines& m, const ReshardProblem& problem);

// The global ranks of engine `engine` of `engines`: [first, first + size) after the training
// ranks. Precondition: engines divides problem.destination_ranks().
std::vector<Rank> engine_ranks(const ReshardProblem& problem, std::int32_t engines, std::int32_t engine);

// The problem with only the members' ranks as destinations (same rank numbers and counts: the
// others hold nothing of any tensor), which a member plan is validated, lowered and run against.
// Refuses, naming the tensor, a destination mesh whose first axis does not separate the engines
// (it must replicate along that axis, unless every engine is a member).
[[nodiscard]] Result<ReshardProblem> members_problem(const ReshardProblem& problem, const MemberEngines& m);

// The plan of a refit over the members, derived from `full` (a plan of `problem` on `cluster`)
// without planning again: the transfers to members are kept; what a member received from a rank
// that is not a member (an NVLink fan-out from another engine's landing GPU, or a piece another
// domain forwarded) is taken off, and each such box enters its domain once more, from the least
// loaded training rank that holds it (over NVLink where one is in the domain), landing on the
// member with the least loaded NIC, which completes the domain's other members over NVLink. No
// rank outside the members receives or relays anything. Valid against members_problem(problem,
// m). Refuses weights quantized at landing ranks (their fp8 is made by a landing rank's step).
struct MemberPlan {
  Plan plan;
  // The first `resent` transfers send again what came through ranks outside the membership;
  // they forward only from one another, so they are also a repair step of their own for members
  // whose relay died.
  std::int32_t resent = 0;
};
// `full` is taken by value: most of its transfers move into the result unchanged, so a caller that
// keeps the full plan for the next change gives a copy (bench/membership_bench times both).
[[nodiscard]] Result<MemberPlan> member_plan(Plan full, const ReshardProblem& problem,
                                             const PlacedCluster& cluster, const MemberEngines& m);

// Where a joining engine's weights come from.
enum class JoinSource : std::uint8_t {
  kTraining,  // the training ranks only (a refit of one engine)
  kPeers,     // live engines only: the training ranks send nothing
  kBoth,      // each tensor from whichever side finishes it sooner (balance of bytes over NICs)
};

// "training", "peers", "both": one name table.
std::string_view join_source_name(JoinSource s);
// kParse naming the known names.
[[nodiscard]] Result<JoinSource> parse_join_source(std::string_view name);

struct JoinOptions {
  std::int32_t engines = 1;         // as MemberEngines::engines
  std::int32_t joining = 0;         // the engine to fill
  std::vector<std::int32_t> peers;  // live engines holding the current weights, ascending, distinct
  JoinSource source = JoinSource::kBoth;
};

// A join as a problem of its own, in its own rank space, which make_plan plans like any problem:
// ranks 0..S-1 are the training ranks (same numbers; none when only peers send, so a peers-only
// join needs no training process at all), S..S+P-1 the peers' ranks in ascending global order,
// their destination shards as their source shards, then the joining engine's ranks. Each
// tensor's sources are either the training layout or the peers' part of the destination layout,
// never both.
struct JoinProblem {
  ReshardProblem problem;
  PlacedCluster cluster;            // the same GPUs, placed by `global`
  std::vector<Rank> global;         // the original problem's rank of each rank of `problem`
  std::int32_t training_ranks = 0;  // S: the training ranks among them (the first)
  std::vector<bool> from_peers;     // per tensor: the peers send it (else the training ranks)
  std::int32_t peer_tensors = 0;    // tensors the peers send
};

// Errors name the engine (joining, a peer, out of range, the joining engine among the peers), a
// peers-only join without peers, or the tensor whose mesh does not separate the engines.
[[nodiscard]] Result<JoinProblem> join_problem(const ReshardProblem& problem, const PlacedCluster& cluster,
                                               const JoinOptions& options);

}  // namespace refit
