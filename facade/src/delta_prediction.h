#pragma once
// The prediction of a delta refit's step (prediction.h, DeltaPrediction) for one plan.
#include "refit/facade/prediction.h"

namespace refit {

struct DeltaPredictionInputs {
  const Plan& plan;
  const ReshardProblem& problem;  // the plan's
  const PlacedCluster& cluster;
  const DeploymentInfo& deployment;  // who runs the step's transfers
  PlanSimulationOptions simulation;  // its window and staging (no trace, no schedule)
};

// kUnsupported, naming why, for a plan the delta executor does not take.
[[nodiscard]] Result<DeltaPrediction> predict_delta(const DeltaPredictionInputs& in, double change_fraction);

// What the prediction assumes, a sentence, for the row's notes; `fp8`: the plan moves fp8 (FP8 in
// flight or trained in fp8).
std::string delta_prediction_note(double change_fraction, bool fp8);

}  // namespace refit
