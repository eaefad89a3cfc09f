#include "refit/executors/sender_quantization.h"

#include <fmt/format.h>

#include "refit/core/try.h"
#include "refit/quantize/quantize.h"

namespace refit {
namespace {

// The tensors `rank` sends some of from its own source boxes.
std::vector<bool> sent_from_source(const Plan& plan, Rank rank) {
  std::vector<bool> out(plan.tensors.size(), false);
  for (const auto& t : plan.transfers)
    if (t.sender == rank)
      for (const auto& s : t.segments)
        if (s.via == kFromSourceShard && s.tensor < out.size()) out[s.tensor] = true;
  return out;
}

// Rows [a, b) of the box lie in a region: their values and scales are runs of the box's, and the
// quantizer reads them through the region's strides in place, with no copy of the parameter. A
// region that cuts a block (or the box along another dim) would need the block gathered first.
[[nodiscard]] Result<QuantizedPart> region_part(const Quantization& q, const Shape& weight, const Box& box,
                                                const lowering::Region& r,
                                                std::span<const std::byte> parameter) {
  for (std::size_t d = 1; d < box.rank(); ++d)
    if (r.box.offset[d] != box.offset[d] || r.box.extent[d] != box.extent[d])
      return unsupported(
          fmt::format("region {} of the box {} splits it along dim {}: only runs of rows are "
                      "quantized in place",
                      r.box.to_string(), box.to_string(), d));
  if (!quant_block_aligned(q.scheme, r.box, weight))
    return unsupported(fmt::format("region {} of the box {} cuts a {} block", r.box.to_string(),
                                   box.to_string(), quant_scheme_name(q.scheme)));
  std::int64_t last = r.offset / 2;  // bf16 elements
  for (std::size_t d = 0; d < r.box.rank(); ++d) last += (r.box.extent[d] - 1) * r.strides[d];
  if (r.offset % 2 != 0 || (last + 1) * 2 > static_cast<std::int64_t>(parameter.size()))
    return mismatch(
        fmt::format("region {} reaches past its parameter's {} bytes", r.box.to_string(), parameter.size()));
  const auto row = r.box.offset[0] - box.offset[0];
  const auto block = quant_block(q.scheme, box.rank());
  const auto scale_shape = quant_scale_shape(q.scheme, box.extent);
  return QuantizedPart{.parameter = r.buffer,
                       .offset = r.offset,
                       .shape = r.box.extent,
                       .strides = r.strides,
                       .values_at = row * row_major_strides(box.extent)[0],
                       .scales_at = row / block[0] * row_major_strides(scale_shape)[0] *
                                    dtype_size(quant_scale_dtype(q.scheme))};
}

[[nodiscard]] Result<std::vector<QuantizedPart>> parts_of(const TensorSpec& weight, const ShardBuffer& given,
                                                          std::span<const std::span<std::byte>> parameters) {
  const auto& q = *weight.quantization;
  if (q.from != DType::kBF16)
    return unsupported(fmt::format("quantizing from {}: refit's quantizer takes bf16", dtype_name(q.from)));
  std::vector<QuantizedPart> parts;
  for (const auto& r : given.regions) {
    if (r.buffer < 0 || static_cast<std::size_t>(r.buffer) >= parameters.size())
      return mismatch(fmt::format("region {} names parameter {}, the side has {}", r.box.to_string(),
                                  r.buffer, parameters.size()));
    parts.push_back(REFIT_TRY(
        region_part(q, weight.shape, given.box, r, parameters[static_cast<std::size_t>(r.buffer)])));
  }
  if (!given.regions.empty()) return parts;
  const std::int64_t expected = given.box.volume() * dtype_size(q.from);
  if (static_cast<std::int64_t>(given.bytes.size()) != expected)
    return mismatch(fmt::format("the source buffer has {} bytes; its box {} in {} takes {}",
                                given.bytes.size(), given.box.to_string(), dtype_name(q.from), expected));
  parts.push_back(QuantizedPart{.parameter = -1,
                                .offset = 0,
                                .shape = given.box.extent,
                                .strides = row_major_strides(given.box.extent),
                                .values_at = 0,
                                .scales_at = 0});
  return parts;
}

// A box the plan sends from `bytes` (row-major): a buffer of its own, or where the side is a
// framework's parameters, one more parameter.
ShardBuffer held(RankBuffers& buffers, std::uint32_t tensor, const Box& box, std::span<std::byte> bytes) {
  if (buffers.source_parameters.empty())
    return ShardBuffer{.tensor = tensor, .box = box, .bytes = bytes, .regions = {}};
  buffers.source_parameters.push_back(bytes);
  return ShardBuffer{
      .tensor = tensor,
      .box = box,
      .bytes = {},
      .regions = {lowering::Region{.box = box,
                                   .buffer = static_cast<std::int32_t>(buffers.source_parameters.size() - 1),
                                   .offset = 0,
                                   .strides = row_major_strides(box.extent)}}};
}

}  // namespace

Bytes SenderQuantization::values_bytes() const { return Bytes{box.volume()}; }

Bytes SenderQuantization::scales_bytes() const { return Bytes{scale_buffer_bytes(scheme, box.extent)}; }

Result<std::vector<SenderQuantization>> sender_quantizations(const Plan& plan, Rank rank,
                                                             const RankBuffers& buffers) {
  const auto partners = quantization_partners(plan.tensors);
  const auto sent = sent_from_source(plan, rank);
  std::vector<SenderQuantization> out;
  for (std::size_t i = 0; i < buffers.sources.size(); ++i) {
    const auto& given = buffers.sources[i];
    if (given.tensor >= plan.tensors.size() || partners[given.tensor] < 0) continue;
    const auto& tensor = plan.tensors[given.tensor];
    const auto where = fmt::format("rank {}: tensor '{}'", rank.value, tensor.name);
    if (tensor.quantization->is_scales())
      return invalid(where +
                     ": a training rank holds no scales of a weight quantized at the senders (its "
                     "executor makes them): pass only the weight's box, in its source dtype");
    const auto scales = static_cast<std::uint32_t>(partners[given.tensor]);
    out.push_back(
        SenderQuantization{.scheme = tensor.quantization->scheme,
                           .weight = given.tensor,
                           .scales = scales,
                           .box = given.box,
                           .source = i,
                           .parts = REFIT_TRY_IN(parts_of(tensor, given, buffers.source_parameters), where),
                           .sent = sent[given.tensor] || sent[scales]});
  }
  return out;
}

std::span<const std::byte> part_source(const RankBuffers& buffers, const SenderQuantization& q,
                                       const QuantizedPart& part) {
  const std::span<const std::byte> memory =
      part.parameter < 0 ? buffers.sources[q.source].bytes
                         : buffers.source_parameters[static_cast<std::size_t>(part.parameter)];
  return memory.subspan(static_cast<std::size_t>(part.offset));
}

SendingBuffers sending_buffers(const RankBuffers& given, std::span<const SenderQuantization> quantizations,
                               std::span<const QuantizedMemory> memory) {
  SendingBuffers out{.buffers = given, .values_index = {}};
  out.buffers.sources.clear();
  std::size_t next = 0;  // the next quantization, in source order
  for (std::size_t i = 0; i < given.sources.size(); ++i) {
    if (next == quantizations.size() || quantizations[next].source != i) {
      out.buffers.sources.push_back(given.sources[i]);
      continue;
    }
    const auto& q = quantizations[next];
    const bool parameters = !out.buffers.source_parameters.empty();
    out.values_index.push_back(parameters ? out.buffers.source_parameters.size()
                                          : out.buffers.sources.size());
    out.buffers.sources.push_back(held(out.buffers, q.weight, q.box, memory[next].values));
    out.buffers.sources.push_back(
        held(out.buffers, q.scales, quant_scale_box(q.scheme, q.box), memory[next].scales));
    ++next;
  }
  return out;
}

void quantize_part(QuantScheme scheme, const Bf16View& in, std::int64_t values_at, std::int64_t scales_at,
                   const QuantizedMemory& memory) {
  quantize(scheme, in,
           std::span(reinterpret_cast<std::uint8_t*>(memory.values.data()) + values_at,
                     static_cast<std::size_t>(element_count(in.shape))),
           memory.scales.subspan(static_cast<std::size_t>(scales_at),
                                 static_cast<std::size_t>(scale_buffer_bytes(scheme, in.shape))));
}

void quantize_box(const RankBuffers& given, const SenderQuantization& q, const QuantizedMemory& memory) {
  for (const auto& part : q.parts)
    quantize_part(q.scheme,
                  Bf16View{.data = reinterpret_cast<const std::uint16_t*>(part_source(given, q, part).data()),
                           .shape = part.shape,
                           .strides = part.strides},
                  part.values_at, part.scales_at, memory);
}

}  // namespace refit
