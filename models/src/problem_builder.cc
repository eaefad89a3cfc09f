#include "refit/models/problem_builder.h"

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/try.h"
#include "refit/models/megatron_layout.h"
#include "refit/models/vllm_layout.h"

namespace refit::models {
namespace {

// Megatron's moe_mlp_glu_interleave_size takes turns of glu_interleave gate rows and as many up
// rows in each rank's linear_fc1 of the routed experts: a model without them, or a size that
// does not divide an expert's gate rows on a rank, is no Megatron configuration.
[[nodiscard]] Result<void> check_glu_interleave(const ModelSpec& model, const MegatronConfig& train) {
  const auto s = train.glu_interleave;
  if (s == 0) return {};
  if (model.num_experts == 0)
    return invalid(
        fmt::format("glu_interleave={}: interleaves the gate and up rows of routed experts, and "
                    "model '{}' has none",
                    s, model.name));
  for (const auto& t : model.tensors) {
    if (!t.is_routed_expert() || t.projection != Projection::kGate) continue;
    const auto rows = t.spec.shape[t.is_stacked() ? 1 : 0];
    if (rows % (train.etp * s) != 0)
      return mismatch(
          fmt::format("glu_interleave={} does not divide the {} gate rows of an expert's "
                      "linear_fc1 on a rank ('{}': {} rows / etp {})",
                      s, rows / train.etp, t.spec.name, rows, train.etp));
  }
  return {};
}

}  // namespace

Result<ReshardProblem> build_problem(const ModelSpec& model, const MegatronConfig& train,
                                     const VllmConfig& infer) {
  REFIT_TRY_IN(check_glu_interleave(model, train), "training layout " + to_string(train));
  const auto source =
      REFIT_TRY_IN(MegatronLayouts::make(model, train), "training layout " + to_string(train));
  const auto source_ranks = static_cast<std::int32_t>(train.world());
  // Each tensor's layouts hold at most every rank of both sides: check before making them.
  REFIT_TRY(checked_mul(static_cast<std::int64_t>(model.tensors.size()), train.world() + infer.world(),
                        limits::kMaxLayoutPositions, "tensors x ranks of both sides (mesh positions)"));
  const auto destination =
      REFIT_TRY_IN(VllmLayouts::make(model, infer, source_ranks), "inference layout " + to_string(infer));
  std::vector<TensorReshard> tensors;
  tensors.reserve(model.tensors.size());
  for (const auto& t : model.tensors) {
    auto src = REFIT_TRY(source.layout(t));
    auto dst = REFIT_TRY(destination.layout(t));
    tensors.push_back(
        TensorReshard{.tensor = t.spec, .source = std::move(src), .destination = std::move(dst)});
  }
  return ReshardProblem::make(std::move(tensors), source_ranks, static_cast<std::int32_t>(infer.world()));
}

}  // namespace refit::models
