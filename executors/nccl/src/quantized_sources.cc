#include "quantized_sources.h"

#include <fmt/format.h>

#include "refit/core/try.h"

namespace refit::nccl_detail {

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
                                   .own = g.buffers.sources[found[i].source].bytes});
    out.ranks_.push_back(LocalRankBuffers{.rank = g.rank, .buffers = std::move(sending.buffers)});
  }
  return out;
}

std::vector<QuantizedBox> QuantizedSources::add_to(LocalView& view) const {
  std::vector<QuantizedBox> boxes;
  for (const auto& b : boxes_) {
    const auto& q = b.quantization;
    if (!q.sent || q.box.volume() == 0) continue;
    auto& ops =
        boxes.emplace_back(QuantizedBox{.rank = ranks_[b.rank].rank, .weight = q.weight, .parts = {}}).parts;
    const auto first = view.ranks[b.rank].first_source;
    const auto values = first + static_cast<std::int32_t>(b.values_index);
    std::int32_t own = -1;  // the box's own buffer in view.shards, once appended
    for (const auto& part : q.parts) {
      if (part.parameter < 0 && own < 0) {
        own = static_cast<std::int32_t>(view.shards.size());
        view.shards.push_back(b.own);
      }
      const std::int32_t source = part.parameter < 0 ? own : first + part.parameter;
      ops.push_back(
          Quantize{.scheme = q.scheme,
                   .source = {.kind = BufferKind::kShard, .index = source, .offset = part.offset},
                   .values = {.kind = BufferKind::kShard, .index = values, .offset = part.values_at},
                   .scales = {.kind = BufferKind::kShard, .index = values + 1, .offset = part.scales_at},
                   .shape = part.shape,
                   .strides = part.strides});
    }
  }
  return boxes;
}

}  // namespace refit::nccl_detail
