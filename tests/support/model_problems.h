#pragma once
// The reference problems, built from the built-in models and a preset cluster.
#include <string>

#include "refit/models/builtin_models.h"
#include "refit/models/hf_config.h"
#include "refit/models/problem_builder.h"
#include "refit/topology/presets.h"

namespace refit::testing {

struct ModelProblem {
  ReshardProblem problem;
  PlacedCluster cluster;  // the preset sized to the problem's job
};

// `model` with a Megatron training layout and a vLLM inference one, on the preset `cluster` sized
// to its job.
inline ModelProblem problem_of(const models::ModelSpec& model, const std::string& train,
                               const std::string& infer, const std::string& cluster) {
  auto problem =
      models::build_problem(model, models::parse_megatron(train).value(), models::parse_vllm(infer).value())
          .value();
  const RankPlacementOptions placement{.source_ranks = problem.source_ranks(),
                                       .destination_ranks = problem.destination_ranks()};
  auto c = size_preset_to_job(cluster, placement).value();
  return {.problem = std::move(problem), .cluster = std::move(c)};
}

// A built-in model's problem.
inline ModelProblem model_problem(const std::string& model, const std::string& train,
                                  const std::string& infer, const std::string& cluster) {
  return problem_of(models::builtin_model(model).value(), train, infer, cluster);
}

// The problem of the HF config.json at `path`.
inline ModelProblem file_problem(const std::string& path, const std::string& train, const std::string& infer,
                                 const std::string& cluster) {
  return problem_of(models::load_hf_config(path).value(), train, infer, cluster);
}

}  // namespace refit::testing
