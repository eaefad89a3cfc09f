#include "refit/models/model_spec.h"

namespace refit::models {

std::optional<int> tensor_parallel_dim(const WeightTensor& t) {
  const int shift = t.is_stacked() ? 1 : 0;
  switch (t.kind) {
    case TensorKind::kReplicated:
      return std::nullopt;
    case TensorKind::kRow:
      return 1 + shift;
    case TensorKind::kVocab:
    case TensorKind::kColumn:
    case TensorKind::kKeyValue:
    case TensorKind::kMtpProjection:
      return shift;
  }
  return std::nullopt;
}

std::int64_t ModelSpec::parameter_count() const {
  std::int64_t total = 0;
  for (const auto& t : tensors) total += element_count(t.spec.shape);
  return total;
}

Bytes ModelSpec::bytes() const {
  Bytes total{0};
  for (const auto& t : tensors) total += t.spec.bytes();
  return total;
}

Bytes ModelSpec::projection_bytes() const {
  Bytes total{0};
  for (const auto& t : tensors)
    if (t.projection != Projection::kNone) total += t.spec.bytes();
  return total;
}

}  // namespace refit::models
