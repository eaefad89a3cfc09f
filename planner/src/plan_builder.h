#pragma once
// Accumulates the segments a strategy decides to move into coalesced transfers, and lays them
// out in plan order. Strategies speak in "phases": a transfer of phase k may forward data of
// transfers of earlier phases only, so ordering by phase keeps every `via` earlier in the plan.
// Inside a phase, senders walk their receivers as a rotated all-to-all (see finish()).
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "refit/core/problem.h"
#include "refit/planner/plan.h"
#include "refit/planner/strategy.h"
#include "refit/topology/rank_map.h"

namespace refit::planner_detail {

// A transfer while the plan is being built; its final id is assigned by finish().
using Handle = std::int32_t;

class PlanBuilder {
 public:
  PlanBuilder(const ReshardProblem& problem, const PlacedCluster& cluster, const StrategyInfo& strategy,
              Bytes chunk);

  // Appends a segment to the message from `from` to `to` identified by (phase, key): segments
  // with equal (phase, key, from, to) travel in one message. `via` is the handle of the message
  // that brought the box to `from`, or kFromSourceShard. Returns the message's handle.
  Handle add(std::uint32_t phase, std::uint64_t key, Rank from, Rank to, std::uint32_t tensor, Box box,
             Handle via = kFromSourceShard);

  // Messages so far: sender, receiver and bytes, by handle (strategies balance on them).
  Rank receiver(Handle h) const { return pending_[static_cast<std::size_t>(h)].to; }
  const PlacedCluster& cluster() const { return cluster_; }

  Plan finish() &&;

 private:
  struct Pending {
    std::uint32_t phase;
    Rank from;
    Rank to;
    Bytes bytes;
    std::vector<Segment> segments;  // via holds handles until finish()
  };
  struct Key {
    std::uint32_t phase;
    std::uint64_t key;
    std::int32_t from;
    std::int32_t to;
    bool operator==(const Key&) const = default;
  };
  struct KeyHash {
    std::size_t operator()(const Key& k) const noexcept;
  };

  LinkKind link_between(Rank a, Rank b) const;

  const ReshardProblem& problem_;
  const PlacedCluster& cluster_;
  const StrategyInfo& strategy_;
  Bytes chunk_;
  std::vector<Pending> pending_;
  std::unordered_map<Key, Handle, KeyHash> index_;
};

}  // namespace refit::planner_detail
