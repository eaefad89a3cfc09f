#pragma once
// The reference problems, built from the built-in models and a preset cluster.
#include <string>

#include "refit/models/builtin_models.h"
#include "refit/models/problem_builder.h"
#include "refit/topology/presets.h"

namespace refit::testing {

struct ModelProblem {
  ReshardProblem problem;
  PlacedCluster cluster;  // the preset sized to the problem's job
};

inline ModelProblem model_problem(const std::string& model, const std::string& train,
                                  const std::string& infer, const std::string& cluster) {
  auto problem =
      models::build_problem(models::builtin_model(model).value(), models::parse_megatron(train).value(),
                            models::parse_vllm(infer).value())
          .value();
  const RankPlacementOptions placement{.source_ranks = problem.source_ranks(),
                                       .destination_ranks = problem.destination_ranks()};
  auto c = size_preset_to_job(cluster, placement).value();
  return {.problem = std::move(problem), .cluster = std::move(c)};
}

}  // namespace refit::testing
