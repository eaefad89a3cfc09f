#pragma once
// From a model and two parallel configurations to every tensor with its two layouts.
#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"

namespace refit::models {

// Source layouts over the Megatron training ranks 0..S-1, destination layouts over the vLLM
// inference ranks S..S+D-1 (S = train.world(), D = infer.world()). Errors name what does not fit.
[[nodiscard]] Result<ReshardProblem> build_problem(const ModelSpec& model, const MegatronConfig& train,
                                                   const VllmConfig& infer);

}  // namespace refit::models
