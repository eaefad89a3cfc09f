#include "quantized_sources.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::nccl_detail {
namespace {

Shape row_major(const Shape& shape) {
  Shape strides(shape.size(), 1);
  for (std::size_t d = shape.size(); d-- > 1;) strides[d - 1] = strides[d] * shape[d];
  return strides;
}

}  // namespace

Result<QuantizedSources> QuantizedSources::make(const Plan& plan, std::span<const LocalRankBuffers> given,
                                                const QuantizedAllocator& allocate) {
  QuantizedSources out;
  for (const auto& g : given) {
    const auto found = REFIT_TRY(sender_quantizations(plan, g.rank, g.buffers));
    std::vector<QuantizedMemory> memory;
    for (const auto& q : found) {
      const auto what = fmt::format("rank {}: tensor '{}'", g.rank.value, plan.tensors[q.weight].name);
      memory.push_back(
          QuantizedMemory{.values = REFIT_TRY(allocate(q.values_bytes(), what + " (fp8 values)")),
                          .scales = REFIT_TRY(allocate(q.scales_bytes(), what + " (scales)"))});
    }
    auto sending = sending_buffers(g.buffers, found, memory);
    for (std::size_t i = 0; i < found.size(); ++i)
      out.boxes_.push_back(Pending{.rank = out.ranks_.size(),
                                   .values_index = sending.values_index[i],
                                   .quantization = found[i],
                                   .source = g.buffers.sources[found[i].source].bytes});
    out.ranks_.push_back(LocalRankBuffers{.rank = g.rank, .buffers = std::move(sending.buffers)});
  }
  return out;
}

std::vector<Quantize> QuantizedSources::add_to(LocalView& view) const {
  std::vector<Quantize> ops;
  for (const auto& b : boxes_) {
    if (!b.quantization.sent || b.quantization.box.volume() == 0) continue;
    const auto values = view.ranks[b.rank].first_source + static_cast<std::int32_t>(b.values_index);
    ops.push_back(Quantize{.scheme = b.quantization.scheme,
                           .source = static_cast<std::int32_t>(view.shards.size()),
                           .values = values,
                           .scales = values + 1,
                           .shape = b.quantization.box.extent,
                           .strides = row_major(b.quantization.box.extent)});
    view.shards.push_back(b.source);
  }
  return ops;
}

}  // namespace refit::nccl_detail
