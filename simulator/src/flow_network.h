#pragma once
// The flows in progress and their max-min fair rates, kept up to date incrementally.
//
// A flow that starts or ends marks its resources dirty. reallocate() then solves max-min only
// over a region grown from the dirty resources, which is usually far smaller than their
// connected component (measured: a few rates change per event in components of thousands of
// flows). The region A is a set of resources; the flows crossing A are re-solved, every other
// flow keeps its rate, and a boundary resource (crossed by a re-solved flow, outside A) offers
// them only the capacity the kept flows leave. The result is accepted when every boundary
// resource r satisfies both
//   (a) no re-solved flow crossing r changed its rate, and
//   (b) no re-solved flow whose bottleneck is r is slower than a kept flow crossing r;
// otherwise the offending resources join A and the region is solved again. On acceptance every
// flow has a bottleneck (a full resource on which no flow is faster): kept flows keep theirs by
// (a), re-solved ones get theirs from the solver and (b); so the rates are the unique max-min
// allocation of the whole network, the same as re-solving the connected component, which is
// what happens after a few rounds of growth anyway.
// A flow's progress is kept as (bytes remaining at time updated_at, rate), so only flows whose
// rate changes are touched.
#include <cstdint>
#include <span>
#include <vector>

#include "refit/simulator/max_min.h"
#include "refit/simulator/model.h"

namespace refit::sim {

class FlowNetwork {
 public:
  explicit FlowNetwork(const Model& model);

  void start(std::int32_t task, double now);
  void finish(std::int32_t task, double now);
  // Recomputes the rates after the starts and finishes since the last call; returns the flows
  // whose rate changed (their completion_time and version changed too), valid until the next call.
  std::span<const std::int32_t> reallocate(double now);

  // When the flow ends if its rate does not change again; +infinity for a stalled flow.
  double completion_time(std::int32_t task) const;
  // Changes whenever the flow's rate does: a completion predicted under an older version is stale.
  std::uint32_t version(std::int32_t task) const { return version_[index(task)]; }
  std::size_t active_flows() const { return active_flows_; }
  // Seconds during which each resource carried at least one flow, up to the last finish().
  const std::vector<double>& busy() const { return busy_; }

 private:
  static std::size_t index(std::int32_t i) { return static_cast<std::size_t>(i); }
  void mark_dirty(std::int32_t resource);
  bool in_region(std::int32_t resource) const {
    return region_mark_[index(resource)] == region_id_;
  }
  void add_to_region(std::int32_t resource);
  void grow_region_to_components();
  void gather_region();
  void visit_resource(std::int32_t resource);
  void set_boundary_capacities();
  bool grow_region(std::span<const double> rates, std::span<const std::int32_t> bottlenecks);
  bool changed(std::int32_t flow, double rate) const;
  void apply_rates(std::span<const double> rates, double now);

  const Model& model_;
  // Per resource: the active flows crossing it, as slots (see Model::resource_slot), so that
  // removing one is O(1): slot_position_ says where a slot sits in its resource's list.
  std::vector<std::vector<std::uint32_t>> crossing_;
  std::vector<std::uint32_t> slot_position_;
  std::vector<std::int32_t> slot_task_;
  std::vector<double> capacity_;
  std::vector<double> busy_;
  std::vector<double> busy_since_;
  std::size_t active_flows_ = 0;

  // Per task (only meaningful while it flows).
  std::vector<double> remaining_;
  std::vector<double> rate_;
  std::vector<double> updated_at_;
  std::vector<std::uint32_t> version_;

  std::vector<std::int32_t> dirty_;
  std::vector<char> is_dirty_;

  // The region of one reallocate(), and the problem gathered from it in one round. Marks are
  // compared with a counter bumped per call (region) or per round (gather), so nothing is cleared.
  std::uint32_t region_id_ = 0;
  std::vector<std::uint32_t> region_mark_;
  std::vector<std::int32_t> region_;
  std::uint32_t gather_id_ = 0;
  std::vector<std::uint32_t> resource_mark_;
  std::vector<std::uint32_t> flow_mark_;
  std::vector<std::int32_t> local_index_;  // resource -> index in the gathered problem
  std::vector<std::int32_t> local_resources_;
  std::vector<std::int32_t> local_flows_;
  std::vector<double> local_capacity_;
  std::vector<double> fastest_kept_;  // per local resource: fastest kept flow crossing it
  std::vector<std::uint32_t> flow_begin_;
  std::vector<std::int32_t> flow_resources_;
  std::vector<std::int32_t> changed_;
  MaxMinSolver solver_;
};

}  // namespace refit::sim
