#pragma once
// The expert placement vLLM actually uses, which is not always the one asked for: vLLM keeps a
// requested round_robin placement only for a model with several expert groups (num_expert_group
// > 1: DeepSeek-V3's n_group = 8; Qwen3-MoE, Mixtral and Kimi-K2 have none or one), with expert
// parallelism over more than one rank, and, when its MoE layers exchange tokens all-to-all (EP
// with dp > 1), only on a backend that builds round-robin routing tables (DeepEP low latency,
// NIXL EP); otherwise it warns and places experts linearly (determine_expert_placement_strategy;
// docs/frameworks.md, "Expert placement as vLLM resolves it"). refit lays the destination out as
// vLLM does, and says when it fell back, so that no destination gets the wrong experts.
#include <optional>
#include <string>

#include "refit/models/model_spec.h"
#include "refit/models/parallel_config.h"

namespace refit::models {

struct ResolvedPlacement {
  VllmConfig infer;                 // as given, with the placement vLLM uses
  std::optional<std::string> note;  // why a requested round_robin became linear
};

ResolvedPlacement resolve_expert_placement(const ModelSpec& model, VllmConfig infer);

}  // namespace refit::models
