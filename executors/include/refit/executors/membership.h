#pragma once
// Elastic refit: which destination engines take part in an execution, and under which epoch.
//
// A rank's engine is the inference engine (one vLLM instance) it belongs to; training ranks have
// none. With a membership set, an executor runs the plan over the member engines only: transfers
// into or out of a non-member engine, and everything that forwards their data, are dropped. A
// rank that dies during an execution makes its engine miss the step; every other engine still
// completes. Every message carries the membership epoch, so a process still at an old epoch (late,
// or restarted with old state) is refused by every member instead of writing into its engines.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/planner/plan.h"

namespace refit {

inline constexpr std::int32_t kNoEngine = -1;

struct EngineMembership {
  std::uint64_t epoch = 1;              // names this membership; every member must use the same
  std::vector<std::int32_t> engine_of;  // by rank: its engine (0, 1, ...), or kNoEngine (training)
  std::vector<bool> members;            // by engine: takes part in the next executions
};

// Every engine a member: destination ranks `source_ranks`.. in consecutive blocks of
// `ranks_per_engine` (as vLLM engines lie in refit's problems). Refuses, naming the counts, a
// destination side that is not a whole number of engines.
[[nodiscard]] Result<EngineMembership> consecutive_engines(std::int32_t source_ranks,
                                                           std::int32_t destination_ranks,
                                                           std::int32_t ranks_per_engine,
                                                           std::uint64_t epoch = 1);

// The membership's engine count, and a check against a world of `world` ranks: an engine of
// every rank, engines numbered 0.. without gaps, a member flag for each. Errors name the rank.
[[nodiscard]] Result<void> check_engine_membership(const EngineMembership& m, std::int32_t world);

// What Executor::set_membership takes: check_engine_membership, and an epoch above 0 (0 is what a
// refit that is not elastic uses). Errors start with "membership: ".
[[nodiscard]] Result<void> check_set_membership(const EngineMembership& m, std::int32_t world);

// Which engines of one execution got all their data, and which missed the step: a rank of theirs
// died or was fenced, or data they needed came through a rank that did. Engine indices, ascending;
// non-member engines are in neither list.
struct EngineOutcomes {
  std::vector<std::int32_t> completed;
  std::vector<std::int32_t> missed;
};

// What an execution leaves out, by rank: every rank of a non-member engine, and every rank of an
// engine with a `gone` rank (dead or fenced: an engine missing a rank cannot serve). A gone
// training rank is left out alone.
std::vector<bool> excluded_ranks(const EngineMembership& m, const std::vector<bool>& gone);

// By transfer: dropped, because its sender or receiver is excluded or it forwards data of a
// dropped transfer. One pass in plan order, as a transfer forwards only earlier ones.
std::vector<bool> dropped_transfers(const Plan& plan, const std::vector<bool>& excluded);

// A member engine misses the step when a rank of it is gone or a transfer into it is dropped.
EngineOutcomes engine_outcomes(const Plan& plan, const EngineMembership& m, const std::vector<bool>& gone,
                               const std::vector<bool>& dropped);

}  // namespace refit
