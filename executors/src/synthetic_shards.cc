#include "refit/executors/synthetic_shards.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

#include "box_rows.h"
#include "refit/core/try.h"
#include "refit/delta/mix64.h"
#include "refit/executors/pattern.h"
#include "refit/quantize/quantize.h"

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

// The fp8 values of a weight quantized at the senders or at its landing ranks, or trained in fp8:
// what a destination holds is made, at every step, from the bf16 the update changes (for one
// trained in fp8, a bf16 master at the training ranks too, as an fp8 trainer keeps).
bool made_from_bf16(const TensorSpec& t) {
  return t.quantization && (t.quantization->site == QuantSite::kSender || t.quantization->made_at_landing() ||
                            t.quantization->site == QuantSite::kTraining);
}
bool quantized_values(const TensorSpec& t) { return made_from_bf16(t) && !t.quantization->is_scales(); }
bool quantized_scales(const TensorSpec& t) { return made_from_bf16(t) && t.quantization->is_scales(); }
bool trained_in_fp8(const TensorSpec& t) {
  return t.quantization && t.quantization->site == QuantSite::kTraining;
}

}  // namespace

Result<SyntheticShards> SyntheticShards::make(const ReshardProblem& problem, const RankBuffers& buffers,
                                              const SyntheticUpdate& update, double frozen_fraction) {
  if (!(frozen_fraction >= 0.0 && frozen_fraction <= 1.0))
    return out_of_range(fmt::format("frozen fraction {} is not in [0, 1]", frozen_fraction));
  SyntheticShards out;
  out.update_ = update;
  const auto weights = values_source_of(problem);
  out.frozen_tensors_ = static_cast<std::uint32_t>(
      std::llround(frozen_fraction * static_cast<double>(problem.tensors().size())));
  for (const bool source : {true, false})
    for (const auto& b : source ? buffers.sources : buffers.destinations) {
      const auto& spec = problem.tensors()[b.tensor].tensor;
      // What the update changes: the weight in bf16 where it is quantized on its way or trained in fp8.
      const auto dtype = quantized_values(spec) ? DType::kBF16 : spec.dtype;
      if (quantized_scales(spec)) {
        (source ? out.sources_ : out.destinations_)
            .push_back(Shard{.tensor = b.tensor, .dtype = spec.dtype, .name = spec.name, .buffer = b});
        continue;
      }
      if (dtype != DType::kBF16 && dtype != DType::kFP32)
        return unsupported(fmt::format("tensor '{}': synthetic weights are bf16 or fp32, not {}", spec.name,
                                       dtype_name(dtype)));
      if (!b.regions.empty())
        return unsupported(
            fmt::format("tensor '{}': synthetic weights fill contiguous shards, not framework "
                        "parameters",
                        spec.name));
      Shard shard{.tensor = b.tensor,
                  .weights_of = weights[b.tensor],
                  .dtype = dtype,
                  .tensor_shape = spec.shape,
                  .name = spec.name,
                  .buffer = b};
      // A bf16 master beside the fp8 the shard holds: every destination of a quantized weight, and a
      // training rank's shard of one trained in fp8.
      const bool master = quantized_values(spec) && (!source || trained_in_fp8(spec));
      auto& held = master ? shard.weights : shard.expected;
      if (!source || master)
        held.assign(static_cast<std::size_t>(b.box.volume() * dtype_size(dtype)), std::byte{0});
      const std::span<std::byte> initial = source && !master ? b.bytes : std::span<std::byte>(held);
      REFIT_TRY(for_each_row(
          spec.shape, b.box, dtype_size(dtype), initial, [&](std::int64_t first, std::span<std::byte> row) {
            return fill_synthetic_weights(row, dtype, first, tensor_seed(update.seed, shard.weights_of));
          }));
      (source ? out.sources_ : out.destinations_).push_back(std::move(shard));
    }
  REFIT_TRY(pair_quantized(problem, out.sources_, false));
  REFIT_TRY(pair_quantized(problem, out.destinations_, true));
  out.requantize();
  return out;
}

// Each shard of fp8 values with a bf16 master finds the rank's shard of its scales on the same side,
// which must be the scales of exactly its blocks (the scales' layout follows the weight's); at the
// destinations, both get room for what they must hold.
Result<void> SyntheticShards::pair_quantized(const ReshardProblem& problem, std::vector<Shard>& shards,
                                             bool destinations) {
  for (auto& d : shards) {
    if (d.weights.empty()) continue;
    const auto& spec = problem.tensors()[d.tensor].tensor;
    const auto want = quant_scale_box(spec.quantization->scheme, d.buffer.box);
    const auto it = std::ranges::find_if(shards, [&](const Shard& s) {
      const auto& q = problem.tensors()[s.tensor].tensor.quantization;
      return q && q->scales_of == spec.name;
    });
    if (it == shards.end() || it->buffer.box != want)
      return mismatch(fmt::format("tensor '{}': the rank's box {} needs its scales box {}", spec.name,
                                  d.buffer.box.to_string(), want.to_string()));
    d.scheme = spec.quantization->scheme;
    d.scales = static_cast<std::size_t>(it - shards.begin());
    if (!destinations) continue;
    it->expected.assign(it->buffer.bytes.size(), std::byte{0});
    d.expected.assign(d.buffer.bytes.size(), std::byte{0});
  }
  return {};
}

// What a dense FP8 refit delivers of each weight quantized on its way, and what an fp8 trainer
// holds of one trained in fp8: the quantizer's values and scales of the box's bf16 master, into
// what a destination must hold and into a training rank's buffers.
void SyntheticShards::requantize() {
  for (const bool source : {true, false}) {
    auto& shards = source ? sources_ : destinations_;
    for (auto& d : shards) {
      if (d.weights.empty()) continue;
      auto& scales = shards[d.scales];
      const Bf16View in{.data = reinterpret_cast<const std::uint16_t*>(d.weights.data()),
                        .shape = d.buffer.box.extent,
                        .strides = row_major_strides(d.buffer.box.extent)};
      const std::span<std::byte> values = source ? d.buffer.bytes : std::span<std::byte>(d.expected);
      quantize(d.scheme, in, std::span(reinterpret_cast<std::uint8_t*>(values.data()), values.size()),
               source ? scales.buffer.bytes : std::span<std::byte>(scales.expected));
    }
  }
}

Result<void> SyntheticShards::step_box(const Shard& shard, std::span<std::byte> bytes) const {
  if (shard.weights_of < frozen_tensors_ || shard.tensor_shape.empty()) return {};  // frozen, or scales
  SyntheticUpdate update = update_;
  update.seed = tensor_seed(update_.seed, shard.weights_of);
  return for_each_row(shard.tensor_shape, shard.buffer.box, dtype_size(shard.dtype), bytes,
                      [&](std::int64_t first, std::span<std::byte> row) {
                        return apply_synthetic_step(row, shard.dtype, first, update, step_);
                      });
}

Result<void> SyntheticShards::advance() {
  ++step_;
  for (auto& s : sources_)
    REFIT_TRY_IN(step_box(s, s.weights.empty() ? s.buffer.bytes : std::span(s.weights)),
                 fmt::format("tensor '{}'", s.name));
  for (auto& d : destinations_)
    REFIT_TRY_IN(step_box(d, d.weights.empty() ? std::span(d.expected) : std::span(d.weights)),
                 fmt::format("tensor '{}'", d.name));
  requantize();
  return {};
}

Result<void> SyntheticShards::verify() const {
  for (const auto& d : destinations_) {
    const auto [got, want] = std::ranges::mismatch(d.buffer.bytes, d.expected);
    if (got == d.buffer.bytes.end()) continue;
    const auto byte = static_cast<std::int64_t>(got - d.buffer.bytes.begin());
    const bool fp8 = !d.weights.empty();
    return fail(ErrorCode::kRuntime,
                fmt::format("tensor '{}' box {}: element {} (row-major in the box) differs from {}synthetic "
                            "step {}",
                            d.name, d.buffer.box.to_string(),
                            byte / (fp8 ? dtype_size(quant_value_dtype(d.scheme)) : dtype_size(d.dtype)),
                            fp8 ? "what the quantizer makes of " : "", step_));
  }
  return {};
}

}  // namespace refit
