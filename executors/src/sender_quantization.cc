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

[[nodiscard]] Result<void> check_source(const TensorSpec& weight, const ShardBuffer& given) {
  const auto& q = *weight.quantization;
  if (q.from != DType::kBF16)
    return unsupported(fmt::format("quantising from {}: refit's quantizer takes bf16", dtype_name(q.from)));
  if (!given.regions.empty())
    return unsupported("quantising a framework parameter's regions is not supported yet: pass the box");
  const std::int64_t expected = given.box.volume() * dtype_size(q.from);
  if (static_cast<std::int64_t>(given.bytes.size()) != expected)
    return mismatch(fmt::format("the source buffer has {} bytes; its box {} in {} takes {}",
                                given.bytes.size(), given.box.to_string(), dtype_name(q.from), expected));
  return {};
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
                     ": a training rank holds no scales of a weight quantised at the senders (its "
                     "executor makes them): pass only the weight's box, in its source dtype");
    REFIT_TRY_IN(check_source(tensor, given), where);
    const auto scales = static_cast<std::uint32_t>(partners[given.tensor]);
    out.push_back(SenderQuantization{.scheme = tensor.quantization->scheme,
                                     .weight = given.tensor,
                                     .scales = scales,
                                     .box = given.box,
                                     .source = i,
                                     .sent = sent[given.tensor] || sent[scales]});
  }
  return out;
}

SendingBuffers sending_buffers(const RankBuffers& given, std::span<const SenderQuantization> quantizations,
                               std::span<const QuantizedMemory> memory) {
  SendingBuffers out{.buffers = given, .values_index = {}};
  out.buffers.sources.clear();
  std::size_t next = 0;  // the next quantisation, in source order
  for (std::size_t i = 0; i < given.sources.size(); ++i) {
    if (next == quantizations.size() || quantizations[next].source != i) {
      out.buffers.sources.push_back(given.sources[i]);
      continue;
    }
    const auto& q = quantizations[next];
    out.values_index.push_back(out.buffers.sources.size());
    out.buffers.sources.push_back(
        ShardBuffer{.tensor = q.weight, .box = q.box, .bytes = memory[next].values, .regions = {}});
    out.buffers.sources.push_back(ShardBuffer{.tensor = q.scales,
                                              .box = quant_scale_box(q.scheme, q.box),
                                              .bytes = memory[next].scales,
                                              .regions = {}});
    ++next;
  }
  return out;
}

}  // namespace refit
