#include "refit/core/problem.h"

#include <unordered_set>

#include <fmt/format.h>

#include "refit/core/checked.h"
#include "refit/core/fingerprint.h"
#include "refit/core/quantized_problem.h"
#include "refit/core/try.h"

namespace refit {
namespace {

[[nodiscard]] Result<void> check_ranks(const Layout& layout, std::int32_t first, std::int32_t count,
                                       const char* side) {
  for (const Rank r : layout.mesh().ranks())
    if (r.value < first || r.value >= first + count)
      return out_of_range(fmt::format("{} mesh uses rank {}, outside the {} ranks [{}, {})", side, r.value,
                                      side, first, first + count));
  return {};
}

// Every tensor's element count and the problem's byte count within limits, so that byte sums
// anywhere downstream (plans, statistics, executors) cannot overflow.
[[nodiscard]] Result<std::int64_t> add_bytes(std::int64_t total, const TensorSpec& t) {
  const auto elements = REFIT_TRY(checked_product(t.shape, limits::kMaxElements, "elements"));
  const auto bytes = REFIT_TRY(checked_mul(elements, dtype_size(t.dtype), limits::kMaxBytes, "bytes"));
  return REFIT_TRY(checked_add(total, bytes, limits::kMaxBytes, "the problem's total bytes"));
}

}  // namespace

Result<ReshardProblem> ReshardProblem::make(std::vector<TensorReshard> tensors, std::int32_t source_ranks,
                                            std::int32_t destination_ranks) {
  if (source_ranks <= 0 || destination_ranks <= 0)
    return out_of_range(fmt::format("a problem needs source and destination ranks (got {} and {})",
                                    source_ranks, destination_ranks));
  std::unordered_set<std::string> names;
  std::int64_t total = 0;
  for (const auto& t : tensors) {
    const auto where = fmt::format("tensor '{}'", t.tensor.name);
    if (!names.insert(t.tensor.name).second) return invalid(where + ": name appears twice");
    total = REFIT_TRY_IN(add_bytes(total, t.tensor), where);
    if (t.source.tensor_shape() != t.tensor.shape)
      return mismatch(fmt::format("{}: source layout shape {} differs from the tensor shape {}", where,
                                  Box::whole(t.source.tensor_shape()).to_string(),
                                  Box::whole(t.tensor.shape).to_string()));
    if (t.destination.tensor_shape() != t.tensor.shape)
      return mismatch(fmt::format("{}: destination layout shape {} differs from the tensor shape {}", where,
                                  Box::whole(t.destination.tensor_shape()).to_string(),
                                  Box::whole(t.tensor.shape).to_string()));
    // What landing ranks make lies on inference ranks (core/quantization.h).
    if (t.tensor.quantization && t.tensor.quantization->made_at_landing())
      REFIT_TRY_IN(check_ranks(t.source, source_ranks, destination_ranks, "landing"), where);
    else
      REFIT_TRY_IN(check_ranks(t.source, 0, source_ranks, "source"), where);
    REFIT_TRY_IN(check_ranks(t.destination, source_ranks, destination_ranks, "destination"), where);
  }
  REFIT_TRY(check_quantized(tensors));
  ReshardProblem p;
  p.tensors_ = std::move(tensors);
  p.source_ranks_ = source_ranks;
  p.destination_ranks_ = destination_ranks;
  return p;
}

Bytes ReshardProblem::total_bytes() const {
  Bytes total{0};
  for (const auto& t : tensors_) total += t.tensor.bytes();
  return total;
}

namespace {

void add_layout(Fingerprint& f, const Layout& l) {
  f.add(l.mesh().shape());
  f.add(l.mesh().ranks().size());
  for (const Rank r : l.mesh().ranks()) f.add(static_cast<std::uint64_t>(r.value));
  f.add(l.placements().size());
  for (const auto& p : l.placements()) f.add(p.to_string());
}

}  // namespace

std::uint64_t problem_fingerprint(const ReshardProblem& problem) {
  Fingerprint f;
  f.add(static_cast<std::uint64_t>(problem.source_ranks()));
  f.add(static_cast<std::uint64_t>(problem.destination_ranks()));
  for (const auto& t : problem.tensors()) {
    f.add(t.tensor);
    add_layout(f, t.source);
    add_layout(f, t.destination);
  }
  return f.value();
}

}  // namespace refit
