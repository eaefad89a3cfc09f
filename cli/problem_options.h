#pragma once
// The PROBLEM options shared by the commands that take a reshard problem (plan, simulate, run):
//   --model NAME|config.json --train "tp=4,pp=8,ep=16" --infer "tp=8,dp=16"
//       [--dtype X] [--per-expert] [--mtp]
//   | --manifest tensors.json
#include <string>

#include <CLI/CLI.hpp>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"

namespace refit::cli {

// How to read a model: the options `refit models` shares with PROBLEM.
struct ModelOptions {
  std::string dtype;        // overrides the config's torch_dtype when not empty
  bool per_expert = false;  // one tensor per routed expert instead of stacked [E, out, in]
  bool mtp = false;         // include DeepSeek-V3's MTP layer
};

struct ProblemOptions {
  std::string model;  // built-in name, config.json, or a directory holding one
  std::string train;  // Megatron sizes
  std::string infer;  // vLLM sizes
  ModelOptions model_options;
  std::string manifest;  // a manifest instead of model + layouts
};

// Registers --dtype, --per-expert and --mtp on `cmd` (or on an option group).
void add_model_options(CLI::App* cmd, ModelOptions& options);
// Registers the PROBLEM options in an option group of `cmd`; `options` must outlive parsing.
void add_problem_options(CLI::App* cmd, ProblemOptions& options);

// A built-in name, or a path to an HF config.json (or its directory).
[[nodiscard]] Result<models::ModelSpec> load_model(const std::string& name_or_path,
                                                   const ModelOptions& options);
struct ParallelLayouts {
  models::MegatronConfig train;
  models::VllmConfig infer;
};
// Parses the --train and --infer values; errors name the option (both are required).
[[nodiscard]] Result<ParallelLayouts> parse_layouts(const std::string& train, const std::string& infer);
// The problem the options describe; errors name the offending option.
[[nodiscard]] Result<ReshardProblem> load_problem(const ProblemOptions& options);

}  // namespace refit::cli
