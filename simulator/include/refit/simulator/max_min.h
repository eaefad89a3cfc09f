#pragma once
// Max-min fair rates by progressive filling (water-filling): raise every flow's rate together;
// when a resource fills up, freeze the flows crossing it at its fair share and continue with
// the others. Each round picks the resource with the smallest fair share
// (remaining capacity / flows not yet frozen), so the result is the unique max-min allocation:
// no flow can go faster without slowing one that is already slower or as slow.
// Weighted: a flow of weight w rises at w times the common level, so a full resource gives its
// flows rates in proportion to their weights (share = remaining capacity / their total weight);
// all weights 1 is the textbook allocation above.
// This solves one allocation from scratch. The engine keeps the allocation of its active flows
// up to date incrementally instead (src/incremental_max_min.h), and is tested against this.
#include <cstdint>
#include <span>
#include <vector>

namespace refit::sim {

class MaxMinSolver {
 public:
  // Flow f crosses resources flow_resources[flow_begin[f] .. flow_begin[f + 1]) (indices into
  // capacity, each at most once; capacities >= 0) with weight weights[f] > 0 (empty: all 1).
  // Returns one rate per flow, valid until the next call. A flow that crosses no resource is
  // unconstrained: +infinity.
  // Cost: O((F*d + R) log R) for F flows of d resources over R resources; no allocation once the
  // buffers have grown to the largest problem seen.
  std::span<const double> solve(std::span<const double> capacity, std::span<const std::uint32_t> flow_begin,
                                std::span<const std::int32_t> flow_resources,
                                std::span<const double> weights = {});
  // For each flow of the last solve, the resource that froze it (its bottleneck: full, and no
  // flow crossing it is faster), or -1 for an unconstrained flow.
  std::span<const std::int32_t> bottlenecks() const { return bottleneck_; }

 private:
  struct Share {
    double rate;
    std::int32_t resource;
    std::uint32_t version;  // stale when the resource changed after this entry was pushed
  };
  // std heap functions build a max-heap; this order puts the smallest share on top, ties broken
  // by resource index so the freezing order is deterministic.
  static bool larger_share(const Share& a, const Share& b) {
    return a.rate > b.rate || (a.rate == b.rate && a.resource > b.resource);
  }
  void index_flows_by_resource(std::size_t resources, std::span<const std::uint32_t> flow_begin,
                               std::span<const std::int32_t> flow_resources);
  double weight(std::size_t flow) const { return weights_.empty() ? 1.0 : weights_[flow]; }
  double share(std::size_t resource) const;
  void push_share(std::int32_t resource);
  void freeze_flows_of(std::int32_t bottleneck, std::span<const std::uint32_t> flow_begin,
                       std::span<const std::int32_t> flow_resources);

  std::vector<double> rates_;
  std::vector<std::int32_t> bottleneck_;
  std::vector<double> left_;             // capacity not yet given to frozen flows
  std::vector<std::int32_t> unfrozen_;   // flows crossing the resource not yet frozen
  std::vector<double> unfrozen_weight_;  // their total weight
  std::span<const double> weights_;      // of the running solve
  std::vector<std::uint32_t> version_;
  std::vector<std::uint32_t> by_resource_begin_;  // resource -> flows, CSR
  std::vector<std::int32_t> by_resource_;
  std::vector<std::uint32_t> fill_cursor_;
  std::vector<Share> heap_;  // min-heap on (rate, resource), lazily deleted
};

}  // namespace refit::sim
