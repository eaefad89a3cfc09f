#include "refit/models/problem_builder.h"

#include "refit/core/checked.h"
#include "refit/core/try.h"
#include "refit/models/megatron_layout.h"
#include "refit/models/vllm_layout.h"

namespace refit::models {

Result<ReshardProblem> build_problem(const ModelSpec& model, const MegatronConfig& train,
                                     const VllmConfig& infer) {
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
