#pragma once
// The reference problems, built from the built-in models and a preset cluster.
#include <string>

#include "refit/models/builtin_models.h"
#include "refit/models/problem_builder.h"
#include "refit/topology/presets.h"

namespace refit::testing {

struct ModelProblem {
  ReshardProblem problem;
  Cluster cluster;
};

inline ModelProblem model_problem(const std::string& model, const std::string& train,
                                  const std::string& infer, const std::string& cluster) {
  auto problem =
      models::build_problem(models::builtin_model(model).value(), models::parse_megatron(train).value(),
                            models::parse_vllm(infer).value())
          .value();
  RankPlacementOptions placement;
  placement.source_ranks = problem.source_ranks();
  placement.destination_ranks = problem.destination_ranks();
  auto c = make_preset_cluster(cluster, placement).value();
  return {.problem = std::move(problem), .cluster = std::move(c)};
}

}  // namespace refit::testing
