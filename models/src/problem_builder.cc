#include "refit/models/problem_builder.h"

#include "refit/models/megatron_layout.h"
#include "refit/models/vllm_layout.h"

namespace refit::models {

Result<ReshardProblem> build_problem(const ModelSpec& model, const MegatronConfig& train,
                                     const VllmConfig& infer) {
  auto source = MegatronLayouts::make(model, train);
  if (!source) return std::unexpected(std::move(source.error()).in("training layout " + to_string(train)));
  const auto source_ranks = static_cast<std::int32_t>(train.world());
  auto destination = VllmLayouts::make(model, infer, source_ranks);
  if (!destination)
    return std::unexpected(std::move(destination.error()).in("inference layout " + to_string(infer)));
  std::vector<TensorReshard> tensors;
  tensors.reserve(model.tensors.size());
  for (const auto& t : model.tensors) {
    auto src = source->layout(t);
    if (!src) return std::unexpected(src.error());
    auto dst = destination->layout(t);
    if (!dst) return std::unexpected(dst.error());
    tensors.push_back(TensorReshard{t.spec, std::move(*src), std::move(*dst)});
  }
  return ReshardProblem::make(std::move(tensors), source_ranks, static_cast<std::int32_t>(infer.world()));
}

}  // namespace refit::models
