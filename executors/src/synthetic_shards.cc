#include "refit/executors/synthetic_shards.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "box_rows.h"
#include "refit/core/try.h"
#include "refit/delta/mix64.h"

namespace refit {
namespace {

// Tensor t's own stream of the update: the same seed for every tensor would give equal weights at
// equal indices.
std::uint64_t tensor_seed(std::uint64_t seed, std::uint32_t tensor) {
  return delta::mix64(seed ^ ((static_cast<std::uint64_t>(tensor) + 1) * delta::kGolden));
}

// Calls f(first global element of the row, the row's bytes) for every row of the shard's box.
template <class F>
[[nodiscard]] Result<void> for_each_row(const Shape& tensor_shape, const Box& box, std::int64_t element_bytes,
                                        std::span<std::byte> bytes, F&& f) {
  const auto row_bytes = static_cast<std::size_t>(box.extent.back() * element_bytes);
  const Shape origin(tensor_shape.size(), 0);
  std::size_t at = 0;
  Result<void> outcome;
  box_rows::for_each_row(box, [&](const Shape& point) {
    if (outcome) outcome = f(box_rows::flat_index(origin, tensor_shape, point), bytes.subspan(at, row_bytes));
    at += row_bytes;
  });
  return outcome;
}

}  // namespace

Result<SyntheticShards> SyntheticShards::make(const ReshardProblem& problem, const RankBuffers& buffers,
                                              const SyntheticUpdate& update, double frozen_fraction) {
  if (!(frozen_fraction >= 0.0 && frozen_fraction <= 1.0))
    return out_of_range(fmt::format("frozen fraction {} is not in [0, 1]", frozen_fraction));
  SyntheticShards out;
  out.update_ = update;
  out.frozen_tensors_ = static_cast<std::uint32_t>(
      std::llround(frozen_fraction * static_cast<double>(problem.tensors().size())));
  for (const bool source : {true, false})
    for (const auto& b : source ? buffers.sources : buffers.destinations) {
      const auto& spec = problem.tensors()[b.tensor].tensor;
      if (spec.dtype != DType::kBF16 && spec.dtype != DType::kFP32)
        return unsupported(fmt::format("tensor '{}': synthetic weights are bf16 or fp32, not {}", spec.name,
                                       dtype_name(spec.dtype)));
      if (!b.regions.empty())
        return unsupported(
            fmt::format("tensor '{}': synthetic weights fill contiguous shards, not framework "
                        "parameters",
                        spec.name));
      Shard shard{.tensor = b.tensor,
                  .dtype = spec.dtype,
                  .tensor_shape = spec.shape,
                  .name = spec.name,
                  .buffer = b,
                  .expected = {}};
      if (!source) shard.expected.assign(b.bytes.size(), std::byte{0});
      const std::span<std::byte> initial = source ? b.bytes : std::span<std::byte>(shard.expected);
      REFIT_TRY(for_each_row(spec.shape, b.box, dtype_size(spec.dtype), initial,
                             [&](std::int64_t first, std::span<std::byte> row) {
                               return fill_synthetic_weights(row, spec.dtype, first,
                                                             tensor_seed(update.seed, b.tensor));
                             }));
      (source ? out.sources_ : out.destinations_).push_back(std::move(shard));
    }
  return out;
}

Result<void> SyntheticShards::step_box(const Shard& shard, std::span<std::byte> bytes) const {
  if (shard.tensor < frozen_tensors_) return {};
  SyntheticUpdate update = update_;
  update.seed = tensor_seed(update_.seed, shard.tensor);
  return for_each_row(shard.tensor_shape, shard.buffer.box, dtype_size(shard.dtype), bytes,
                      [&](std::int64_t first, std::span<std::byte> row) {
                        return apply_synthetic_step(row, shard.dtype, first, update, step_);
                      });
}

Result<void> SyntheticShards::advance() {
  ++step_;
  for (const auto& s : sources_)
    REFIT_TRY_IN(step_box(s, s.buffer.bytes), fmt::format("tensor '{}'", s.name));
  for (auto& d : destinations_) REFIT_TRY_IN(step_box(d, d.expected), fmt::format("tensor '{}'", d.name));
  return {};
}

Result<void> SyntheticShards::verify() const {
  for (const auto& d : destinations_) {
    const auto [got, want] = std::ranges::mismatch(d.buffer.bytes, d.expected);
    if (got == d.buffer.bytes.end()) continue;
    const auto byte = static_cast<std::int64_t>(got - d.buffer.bytes.begin());
    return fail(ErrorCode::kRuntime,
                fmt::format("tensor '{}' box {}: element {} (row-major in the box) differs from synthetic "
                            "step {}",
                            d.name, d.buffer.box.to_string(), byte / dtype_size(d.dtype), step_));
  }
  return {};
}

}  // namespace refit
