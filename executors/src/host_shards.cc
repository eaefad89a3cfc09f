#include "refit/executors/host_shards.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/executors/pattern.h"
#include "refit/executors/streaming_stores.h"

namespace refit {
namespace {

// The rank's box of a tensor in a layout, if the rank is in its mesh and the box is not empty.
std::optional<Box> box_of(const Layout& layout, Rank rank) {
  if (!layout.mesh().position_of_rank(rank)) return std::nullopt;
  auto box = layout.local_box(rank);
  if (!box || box->empty()) return std::nullopt;
  return *box;
}

// A weight quantized at the senders (its values, not its scales).
bool quantized_at_senders(const TensorSpec& t) { return held_dtype(t, true) != t.dtype; }
// What some rank makes on the way (the senders' scales, the landing ranks' values and scales):
// no training rank holds it.
bool made_on_the_way(const TensorSpec& t) { return !held_at_source(t); }
bool made_scales(const TensorSpec& t) { return made_on_the_way(t) && t.quantization->is_scales(); }
// fp8 values a quantizer makes, at a sender or at a landing rank.
bool quantized_values(const TensorSpec& t) {
  return quantized_at_senders(t) || (made_on_the_way(t) && !t.quantization->is_scales());
}
bool landing_copy(const TensorSpec& t) { return t.quantization && t.quantization->is_landing_copy(); }
// What a rank's source box of tensor t holds: the pattern, or for a weight quantized on its way
// the finite bf16 pattern its sender (or its landing rank) quantizes.
void fill_source(std::uint32_t t, const TensorSpec& spec, const Box& box, std::span<std::byte> out) {
  if (quantized_at_senders(spec) || landing_copy(spec)) {
    fill_bf16_weight_pattern(t, spec.shape, box, out);
  } else {
    fill_pattern(t, spec.shape, box, dtype_size(spec.dtype), out);
  }
}

// A destination box of a weight quantized on its way: its values and its scales (`scales`, the
// rank's box of the weight's scales tensor) must be what the quantizer makes of tensor t's pattern.
[[nodiscard]] Result<void> verify_quantized(std::uint32_t t, const TensorSpec& spec,
                                            const ShardBuffer& values, std::span<const std::byte> scales) {
  const auto want = quantized_pattern(t, spec, values.box);
  for (std::size_t i = 0; i < want.values.size(); ++i)
    if (values.bytes[i] != want.values[i])
      return fail(ErrorCode::kRuntime, fmt::format("fp8 value {} of the box (row-major) is 0x{:02x}, the "
                                                   "quantizer makes 0x{:02x}",
                                                   i, static_cast<unsigned>(values.bytes[i]),
                                                   static_cast<unsigned>(want.values[i])));
  if (scales.size() != want.scales.size() || !std::equal(scales.begin(), scales.end(), want.scales.begin()))
    return fail(ErrorCode::kRuntime, "its scales differ from what the quantizer makes");
  return {};
}

}  // namespace

Result<HostShards> HostShards::allocate(const ReshardProblem& problem, Rank rank,
                                        const HostAllocator& allocator) {
  struct Wanted {
    std::uint32_t tensor;
    bool source;
    Box box;
  };
  std::vector<Wanted> wanted;
  std::vector<Bytes> sizes;
  const auto& tensors = problem.tensors();
  for (std::uint32_t t = 0; t < tensors.size(); ++t) {
    const auto& spec = tensors[t].tensor;
    for (const bool source : {true, false}) {
      const auto box = box_of(source ? tensors[t].source : tensors[t].destination, rank);
      if (!box || (source && made_on_the_way(spec))) continue;
      sizes.push_back(Bytes{box->volume() * dtype_size(held_dtype(spec, source))});
      wanted.push_back(Wanted{.tensor = t, .source = source, .box = *box});
    }
  }
  HostShards out;
  out.storage_ = REFIT_TRY(
      allocate_pooled(allocator, sizes, fmt::format("allocating the shards of rank {}", rank.value)));
  for (std::size_t i = 0; i < wanted.size(); ++i) {
    const auto& w = wanted[i];
    const auto span = out.storage_[i]->bytes();
    if (w.source) fill_source(w.tensor, tensors[w.tensor].tensor, w.box, span);
    (w.source ? out.buffers_.sources : out.buffers_.destinations)
        .push_back(ShardBuffer{.tensor = w.tensor, .box = w.box, .bytes = span});
  }
  out.clear_destinations();
  return out;
}

HostShards HostShards::allocate(const ReshardProblem& problem, Rank rank) {
  return *allocate(problem, rank, [](Bytes bytes) -> Result<std::unique_ptr<HostAllocation>> {
    return heap_allocation(bytes);
  });
}

void HostShards::clear_destinations() {
  for (const auto& d : buffers_.destinations) streaming_zero(d.bytes.data(), d.bytes.size());
  store_fence();
}

Result<void> HostShards::verify(const ReshardProblem& problem) const {
  const auto pattern = values_source_of(problem);
  std::unordered_map<std::string_view, std::span<const std::byte>> scales;  // by the weight's name
  for (const auto& d : buffers_.destinations)
    if (const auto& spec = problem.tensors()[d.tensor].tensor; made_scales(spec))
      scales.emplace(spec.quantization->scales_of, d.bytes);
  for (const auto& d : buffers_.destinations) {
    const auto& spec = problem.tensors()[d.tensor].tensor;
    const auto where = fmt::format("tensor '{}' box {}", spec.name, d.box.to_string());
    if (made_scales(spec)) continue;  // checked with its weight
    if (quantized_values(spec)) {
      const auto it = scales.find(spec.name);
      REFIT_TRY_IN(verify_quantized(pattern[d.tensor], spec, d,
                                    it == scales.end() ? std::span<const std::byte>{} : it->second),
                   where);
      continue;
    }
    if (landing_copy(spec)) {
      std::vector<std::byte> want(d.bytes.size());
      fill_bf16_weight_pattern(d.tensor, spec.shape, d.box, want);
      if (!std::ranges::equal(want, d.bytes))
        return fail(ErrorCode::kRuntime, where + ": the landing copy differs from the training ranks' bf16");
      continue;
    }
    REFIT_TRY_IN(verify_pattern(d.tensor, spec.shape, d.box, dtype_size(spec.dtype), d.bytes), where);
  }
  return {};
}

}  // namespace refit
