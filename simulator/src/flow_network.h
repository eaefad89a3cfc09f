#pragma once
// The flows in progress: their max-min fair rates (kept by IncrementalMaxMin), how far each has
// got, and how long each resource has been busy.
// A flow's progress is kept as (bytes remaining at time updated_at, rate), so only flows whose
// rate changes are touched.
#include <cstdint>
#include <span>
#include <vector>

#include "incremental_max_min.h"
#include "refit/core/index.h"
#include "refit/simulator/model.h"

namespace refit::sim {

class FlowNetwork {
 public:
  // rate_tolerance: see SimulateOptions.
  FlowNetwork(const Model& model, double rate_tolerance);

  void start(std::int32_t task, double now);
  void finish(std::int32_t task, double now);
  // Whether `to` can take over the flow of `from` as it finishes: it moves bytes across the
  // same resources with the same weight.
  bool can_hand_over(std::int32_t from, std::int32_t to) const;
  // `from` has finished and `to` carries on with its rate: no other flow's rate changes.
  void hand_over(std::int32_t from, std::int32_t to, double now);
  // Recomputes the rates after the starts and finishes since the last call; returns the flows
  // whose rate changed (their completion_time changed too), valid until the next call.
  std::span<const std::int32_t> reallocate(double now);

  // When the flow ends if its rate does not change again; +infinity for a stalled flow.
  double completion_time(std::int32_t task) const;
  // Seconds during which each resource carried at least one flow, up to the last finish().
  const std::vector<double>& busy() const { return busy_; }

 private:
  const Model& model_;
  IncrementalMaxMin rates_;
  std::vector<double> busy_;
  std::vector<double> busy_since_;

  // A flow's progress: its bytes left and its rate as of `updated_at`. Kept together, since a
  // rate change reads and writes all three (and re-times the flow from them) at once.
  struct Progress {
    double remaining = 0.0;
    double rate = 0.0;
    double updated_at = 0.0;
  };
  std::vector<Progress> progress_;  // per task, only meaningful while it flows
};

}  // namespace refit::sim
