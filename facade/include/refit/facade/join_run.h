#pragma once
// Elastic refit's join, performed (docs/elastic.md): the join's plan and each process's part in
// it, once for `refit run --join` and the Python package. A join is a world of its own
// (membership.h's JoinProblem, with its own rank numbers): only its ranks take part, over a
// bootstrap of their own, and every other process of the job is free. A peer sends from the
// buffers it holds its engine's weights in (its destination buffers of the full refit), not from
// a copy.
#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "refit/core/error.h"
#include "refit/executors/executor.h"
#include "refit/facade/problem_source.h"
#include "refit/planner/membership.h"
#include "refit/planner/strategy.h"

namespace refit {

// What a process of the full job does in a join.
enum class JoinRole : std::uint8_t {
  kFree,      // nothing: it is not in the join's world
  kTraining,  // a training rank that sends the tensors the training ranks send
  kPeer,      // a rank of a live engine that sends from its own weights
  kJoining,   // a rank of the engine being filled
};

// "free", "training", "peer", "joining": one name table.
std::string_view join_role_name(JoinRole role);

// One process's part in a join.
struct JoinPart {
  JoinRole role = JoinRole::kFree;  // what it does
  std::optional<Rank> rank;         // its rank in the join's world; none when free
};

// The engines of a join as the user names them (--join, --peers, --from).
struct JoinRequest {
  std::int32_t joining = 0;             // the engine that joins or restarts
  std::vector<std::int32_t> peers;      // live engines that send; empty: every other engine
  JoinSource from = JoinSource::kBoth;  // who sends: the training ranks, the peers or both
};

// A join planned: what every process of the full job needs to take its part.
struct JoinRun {
  JoinOptions options;   // the request resolved: the engine count, the peers that send
  JoinProblem join;      // in its own rank space (membership.h)
  Plan plan;             // of join.problem on join.cluster, validated
  Seconds plan_seconds;  // wall time planning it

  // The part of rank `global` of the full problem.
  JoinPart part(Rank global) const;
  // The join world's global ranks, by join rank (join.global).
  const std::vector<Rank>& world() const { return join.global; }
};

// The join of `request` into the problem's `engines` engines (inference_engines()), planned with
// `strategy`. Errors name the option: --join (an engine out of range, a problem whose meshes do
// not separate the engines), --peers (out of range, the joining engine, not ascending and
// distinct, given where only the training ranks send, none left to send).
[[nodiscard]] Result<JoinRun> plan_join(const ReshardProblem& problem, const PlacedCluster& cluster,
                                        std::int32_t engines, const JoinRequest& request,
                                        std::string_view strategy, const PlanOptions& options);

// The buffers rank `global` prepares the join's plan with, made of `full`, the buffers it
// prepared the full problem's plan with: a training rank's source buffers of the tensors the
// training ranks send, a peer's destination buffers of the tensors the peers send (as its
// sources), the joining engine's destination buffers. The same memory, nothing copied; nothing
// for a free rank.
RankBuffers join_buffers(const JoinRun& run, Rank global, const RankBuffers& full);

}  // namespace refit
