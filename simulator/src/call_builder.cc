#include "call_builder.h"

#include <algorithm>

namespace refit::sim {

std::int32_t add_call(CallSchedule& schedule, Call call) {
  schedule.calls.push_back(std::move(call));
  return static_cast<std::int32_t>(schedule.calls.size()) - 1;
}

RingShape ring_shape(std::span<const Rank> ranks, const PlacedCluster& cluster) {
  std::vector<std::int32_t> domains;
  domains.reserve(ranks.size());
  for (const Rank r : ranks) domains.push_back(cluster.domain_of(r));
  std::ranges::sort(domains);
  const auto distinct = std::ranges::unique(domains);
  return RingShape{.ranks = static_cast<std::int32_t>(ranks.size()),
                   .domains = static_cast<std::int32_t>(domains.size() - distinct.size())};
}

Collective ring_collective(CollectiveKind kind, std::vector<Rank> ranks, Bytes bytes,
                           const DeployInputs& in) {
  const RingShape shape = ring_shape(ranks, in.cluster);
  const auto& k = in.constants;
  const bool broadcast = kind == CollectiveKind::kBroadcast;
  const double network = broadcast ? k.network_broadcast_efficiency : k.network_all_gather_efficiency;
  return Collective{
      .kind = kind,
      .ranks = std::move(ranks),
      .bytes = bytes,
      .latency = broadcast ? broadcast_latency(k.nccl, shape) : all_gather_latency(k.nccl, shape),
      .efficiency = shape.domains > 1 ? network : k.nvlink_efficiency};
}

Bytes held_bytes(const ReshardProblem& problem, std::int32_t tensor, Rank rank) {
  const auto& t = problem.tensors()[static_cast<std::size_t>(tensor)];
  const Layout& layout = problem.is_source(rank) ? t.source : t.destination;
  const auto position = layout.mesh().position_of_rank(rank);
  if (!position) return Bytes{0};
  return Bytes{layout.box_at_position(*position).volume() * dtype_size(t.tensor.dtype)};
}

bool quantized_on_loading(const TensorSpec& t) {
  return t.quantization && t.quantization->site == QuantSite::kReceiver;
}

Bytes cast_bytes(const TensorSpec& t, Bytes source_bytes) {
  const QuantScheme s = t.quantization->scheme;
  const std::int64_t elements = source_bytes.value / dtype_size(t.quantization->from);
  const std::int64_t per_block = element_count(quant_block(s, t.shape.size()));
  const std::int64_t blocks = (elements + per_block - 1) / per_block;
  return Bytes{elements * dtype_size(quant_value_dtype(s)) + blocks * dtype_size(quant_scale_dtype(s))};
}

void note_engine_cast(CallSchedule& schedule) {
  if (std::ranges::none_of(schedule.calls, [](const Call& c) { return !c.quantizes.empty(); })) return;
  schedule.notes.emplace_back(
      "NeMo RL casts each weight to fp8 as vLLM loads it (fp8.load_weights), then copies the fp8 values and "
      "scales in: the cast is charged at the rate this prediction has for refit's quantizer on that GPU, for "
      "want of a figure of NeMo RL's own (docs/deployed_refit.md, gap G11)");
}

}  // namespace refit::sim
