#include "refit/models/expert_placement.h"

#include <algorithm>

#include <fmt/format.h>

namespace refit::models {
namespace {

// Why vLLM would not keep round_robin for this model and layout, or nothing when it would.
std::optional<std::string> fallback_reason(const ModelSpec& model, const VllmConfig& infer) {
  if (infer.ep() <= 1) return "expert parallelism over one rank has nothing to place";
  if (model.expert_groups <= 1)
    return fmt::format(
        "vLLM keeps it only for models with several expert groups (n_group > 1), and {} has {}", model.name,
        model.expert_groups);
  const bool all_to_all = infer.dp > 1;  // FusedMoEParallelConfig.use_all2all_kernels, with EP
  const auto backends = all2all_backends();
  const auto backend = std::ranges::find(backends, infer.all2all, &All2AllBackend::name);
  if (all_to_all && (backend == backends.end() || !backend->keeps_round_robin))
    return fmt::format(
        "with dp > 1 vLLM's MoE layers exchange tokens all-to-all, and it keeps round_robin "
        "only on the deepep_low_latency or nixl_ep backend, not all2all={}",
        infer.all2all);
  return std::nullopt;
}

}  // namespace

ResolvedPlacement resolve_expert_placement(const ModelSpec& model, VllmConfig infer) {
  if (infer.placement != ExpertPlacement::kRoundRobin) return {.infer = infer, .note = std::nullopt};
  const auto reason = fallback_reason(model, infer);
  if (!reason) return {.infer = infer, .note = std::nullopt};
  infer.placement = ExpertPlacement::kLinear;
  return {.infer = infer,
          .note = fmt::format("placement=round_robin: vLLM falls back to linear expert placement ({}); "
                              "the experts are laid out linearly, as vLLM will load them",
                              *reason)};
}

}  // namespace refit::models
