#pragma once
// What each rank of `refit run` measured, gathered on rank 0 and printed there: bytes moved,
// seconds, aggregate and per-rank GB/s, and the verification result.
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/executors/executor.h"

namespace refit::cli {

// Resident memory of a rank's process (VmRSS) over `refit run --iterations`.
struct ResidentMemory {
  Bytes after_prepare;
  Bytes after_warm_up;  // after RunSummary::warm_up_iterations executions
  Bytes end;            // after the last execution
};

// One step of a delta refit on one rank: the payload bytes it sent, and what the step did.
struct RankDeltaStep {
  Bytes sent;
  DeltaStepReport delta;
};

// What a rank did in `refit run --join` (run_join.h), after the full refit.
struct RankJoin {
  std::string role;             // join_role_name: free, training, peer or joining
  std::int32_t join_rank = -1;  // its rank in the join's world; -1 when free
  Bytes sent;
  Bytes received;
  Seconds wall;                      // execute() on this rank, from the join world's barrier
  bool checked = false;              // --verify ran on this (joining) rank
  std::optional<std::string> wrong;  // the first wrong element, when verification failed
};

struct RankResult {
  std::int32_t rank = 0;
  Bytes sent;  // per iteration
  Bytes received;
  std::vector<Seconds> walls;        // execute() on this rank per iteration, each from a common barrier
  Seconds elapsed;                   // the executor's own, last iteration: first byte posted to last landed
  Bytes stored_directly;             // of sent, stored into mapped peer memory (last iteration)
  WorkTimes work;                    // what the executor timed of its work, last iteration
  bool checked = false;              // --verify ran on this rank
  std::optional<std::string> wrong;  // the first wrong element, when verification failed
  ResidentMemory resident;
  std::vector<RankDeltaStep> delta_steps;  // --delta: per iteration
  std::optional<EngineOutcomes> engines;   // --elastic: last iteration
  std::optional<RankJoin> join;            // --join
};

std::string encode(const RankResult& r);
[[nodiscard]] Result<RankResult> decode_rank_result(std::string_view text);

// The join of `refit run --join`, as every rank planned it.
struct JoinSummary {
  std::int32_t engine = 0;          // the engine that restarted and was filled again
  std::vector<std::int32_t> peers;  // the live engines that sent
  std::string from;                 // join_source_name
  std::string plan_hash;
  std::vector<std::int32_t> world;  // the join world's global ranks, by join rank
  std::int32_t peer_tensors = 0;    // tensors the peers sent, of `tensors`
  std::int32_t tensors = 0;
};

struct RunSummary {
  std::string executor;
  std::string strategy;
  std::string plan_hash;
  std::int32_t training_ranks = 0;
  std::int32_t inference_ranks = 0;
  bool verify = false;
  std::int32_t warm_up_iterations = 1;
  std::optional<double> delta;            // --delta: the synthetic update's change fraction
  std::vector<RankResult> ranks;          // by rank; --elastic: rank 0's alone
  std::optional<EngineOutcomes> engines;  // --elastic
  std::optional<JoinSummary> join;        // --join

  Bytes bytes() const;                             // every byte put per iteration, relays included
  std::vector<Seconds> iteration_seconds() const;  // per iteration, the slowest rank's execute()
  Seconds seconds() const;                         // the median of iteration_seconds()
  // --verify ran and every destination element was right (with --join, the refilled engine's too).
  bool verified() const;
  // The largest growth of a rank's resident memory from the end of the warm-up to the end (can be
  // negative), and that rank.
  std::pair<Bytes, std::int32_t> resident_growth() const;
  // The rank that spent the most time working in the last iteration (what its executor timed).
  const RankResult* busiest() const;
};

void print_summary(const RunSummary& s, bool json);

}  // namespace refit::cli
