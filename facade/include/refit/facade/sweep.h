#pragma once
// The what-if use case, once: every combination of values of some keys (the layouts, a preset's
// hardware), each point predicted as `refit simulate --compare` predicts one problem, points
// predicted side by side on a pool of threads. `refit sweep` prints what these return; the
// Python package's refit.sweep binds them, and hands points to any concurrent.futures executor
// (processes, Ray, Dask) with predict_point.
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "refit/core/error.h"
#include "refit/facade/cluster_source.h"
#include "refit/facade/prediction.h"
#include "refit/facade/problem_source.h"

namespace refit {

// The keys a sweep varies besides a preset's override keys (preset_keys()).
inline constexpr std::string_view kSweepTrain = "train";  // Megatron sizes, as --train
inline constexpr std::string_view kSweepInfer = "infer";  // vLLM sizes, as --infer
// NICs per NVLink domain: the preset's nics_per_node for its nodes per domain.
inline constexpr std::string_view kSweepNicsPerDomain = "nics_per_domain";

// (key, meaning) of every key a sweep can vary: the preset keys, nics_per_domain, train, infer.
std::vector<std::pair<std::string, std::string>> sweep_keys();

// One varied key and the values it takes, as text (a layout "tp=8,engines=2", a number "400").
struct SweepAxis {
  std::string key;                  // one of sweep_keys()
  std::vector<std::string> values;  // in the order the points take them
};

// One point of a sweep: the value of each axis, and the problem and cluster it stands for.
struct SweepPoint {
  std::vector<std::pair<std::string, std::string>> values;  // (key, value), in the axes' order
  ProblemSource problem;                                    // the problem with the point's layouts
  ClusterSource cluster;                                    // the preset with the point's overrides
};

// Every combination of the axes' values (the last axis varying fastest), applied to the two
// sources: train and infer replace the problem's layouts, the other keys become overrides of the
// cluster's preset. Errors name the axis (--vary KEY): an unknown or repeated key, no values, a
// layout key for a problem that is no model, a hardware key for a cluster that is no preset, a
// nics_per_domain that does not split over a domain's nodes.
[[nodiscard]] Result<std::vector<SweepPoint>> sweep_points(const ProblemSource& problem,
                                                           const ClusterSource& cluster,
                                                           const std::vector<SweepAxis>& axes);

// The point's problem and cluster loaded and every strategy compared (compare()). Errors begin
// with the point ("at train=..., nic_gbps=...").
[[nodiscard]] Result<Predictions> predict_point(const SweepPoint& point, const PredictOptions& options);

// How sweep() predicts its points.
struct SweepOptions {
  PredictOptions predict;  // for every point; a trace is refused (which point would it draw?)
  // Points predicted at once, each on a thread of its own; 0: one per core of this machine.
  std::int32_t jobs = 0;
  // After each point, with the points done and their total; one call at a time, from the thread
  // that predicted it.
  std::function<void(std::size_t done, std::size_t total)> progress;
};

// Every point predicted, options.jobs at a time; the results in the points' order, each a
// point's predictions or its error.
[[nodiscard]] Result<std::vector<Result<Predictions>>> sweep(const std::vector<SweepPoint>& points,
                                                             const SweepOptions& options);

}  // namespace refit
