#include "m2n_calls.h"

#include <algorithm>
#include <iterator>
#include <map>
#include <optional>
#include <set>

#include <fmt/format.h>

#include "refit/core/index.h"

namespace refit::sim {
namespace {

enum class Projection : std::uint8_t { kNone, kGateOrUp, kDown };

// The projection an FFN weight name ends in: `...gate_proj.weight`, a stacked `...experts.up_proj`,
// Mixtral's w1 (gate), w3 (up), w2 (down).
Projection projection_of(std::string_view name) {
  if (name.ends_with(".weight")) name.remove_suffix(std::string_view(".weight").size());
  const auto last = name.substr(name.rfind('.') + 1);
  if (last == "gate_proj" || last == "up_proj" || last == "w1" || last == "w3") return Projection::kGateOrUp;
  if (last == "down_proj" || last == "w2") return Projection::kDown;
  return Projection::kNone;
}

bool is_dense_mlp(std::string_view name) { return name.find(".mlp.") != std::string_view::npos; }

// Each rank's bytes in the call: packed and sent (from its own shard), received.
struct RankTraffic {
  std::map<std::int32_t, Bytes> packed, received;
  std::map<std::int32_t, std::set<std::int32_t>> peers;
};

RankTraffic traffic_of(const Plan& plan, std::span<const std::int32_t> transfers) {
  RankTraffic out;
  for (const std::int32_t i : transfers) {
    const Transfer& t = plan.transfers[at(i)];
    const bool own =
        std::ranges::all_of(t.segments, [](const Segment& s) { return s.via == kFromSourceShard; });
    if (own) out.packed[t.sender.value] += t.bytes;
    out.received[t.receiver.value] += t.bytes;
    out.peers[t.sender.value].insert(t.receiver.value);
    out.peers[t.receiver.value].insert(t.sender.value);
  }
  return out;
}

std::vector<Rank> inference_ranks(const ReshardProblem& problem) {
  std::vector<Rank> ranks;
  for (std::int32_t r = problem.source_ranks(); r < problem.world_size(); ++r) ranks.push_back(Rank{r});
  return ranks;
}

std::vector<Rank> communicator(const ReshardProblem& problem, std::span<const Rank> stage) {
  std::vector<Rank> ranks(stage.begin(), stage.end());
  std::ranges::copy(inference_ranks(problem), std::back_inserter(ranks));
  return ranks;
}

// A call's transfers in the split kernel's two phases: what the sources send (the injection) and
// what receivers forward (the ring and its NVLink fan-out).
struct Phases {
  std::vector<std::int32_t> injection, ring;
  std::set<std::int32_t> injected;  // the injection's receivers

  std::vector<Rank> injection_communicator(std::span<const Rank> stage) const {
    std::vector<Rank> ranks(stage.begin(), stage.end());
    for (const std::int32_t r : injected) ranks.push_back(Rank{r});
    return ranks;
  }
};

// The phases, when some receiver forwards over the network; none when every forward stays in
// an NVLink domain (the unsplit kernel, which forwards as slices land).
std::optional<Phases> split_phases(const Plan& plan, std::span<const std::int32_t> transfers) {
  Phases out;
  bool network_ring = false;
  for (const std::int32_t i : transfers) {
    const Transfer& t = plan.transfers[at(i)];
    if (t.upstream().empty()) {
      out.injection.push_back(i);
      out.injected.insert(t.receiver.value);
    } else {
      out.ring.push_back(i);
      network_ring = network_ring || t.link == LinkKind::kNetwork;
    }
  }
  if (!network_ring) return std::nullopt;
  return out;
}

}  // namespace

bool is_routed_expert(std::string_view name) {
  return name.find(".experts.") != std::string_view::npos &&
         name.find("shared_expert") == std::string_view::npos;
}

bool is_bulk_parameter(std::string_view name) {
  if (projection_of(name) == Projection::kNone || name.find("shared_expert") != std::string_view::npos)
    return false;
  return is_routed_expert(name) || is_dense_mlp(name);
}

Result<std::vector<std::vector<std::int32_t>>> transfers_by_tensor(const Plan& plan) {
  std::vector<std::vector<std::int32_t>> out(plan.tensors.size());
  for (const Transfer& t : plan.transfers) {
    const auto tensor = t.segments.front().tensor;
    for (const Segment& s : t.segments)
      if (s.tensor != tensor)
        return unsupported(fmt::format("transfer #{} carries '{}' and '{}': M2N moves one parameter per call",
                                       t.id, plan.tensors[tensor].name, plan.tensors[s.tensor].name));
    out[tensor].push_back(t.id);
  }
  return out;
}

std::vector<Call> reshard_calls(const DeployInputs& in, std::int32_t tensor,
                                std::span<const std::int32_t> transfers, std::span<const Rank> stage,
                                std::int32_t queue, bool engine_loads) {
  const auto& spec = in.problem.tensors()[at(tensor)].tensor;
  const auto& name = spec.name;
  const auto traffic = traffic_of(in.plan, transfers);
  std::size_t most_peers = 0;
  for (const auto& [rank, peers] : traffic.peers) most_peers = std::max(most_peers, peers.size());
  const auto barrier = [&](std::vector<Rank> ranks) {
    return barrier_latency(in.constants.nccl, ring_shape(ranks, in.cluster));
  };
  const Seconds world_barrier = barrier(communicator(in.problem, stage));
  Call call{.label = name,
            .group = "M2N reshard",
            .queue = queue,
            .launch = in.constants.launch * static_cast<double>(1 + most_peers) + world_barrier,
            .finish = world_barrier,
            .transfers = std::vector(transfers.begin(), transfers.end())};
  const bool stacked = is_routed_expert(name) && in.problem.tensors()[at(tensor)].tensor.shape.size() >= 3;
  for (const Rank r : stage) {
    const auto packed = traffic.packed.find(r.value);
    const Bytes stack = stacked ? held_bytes(in.problem, tensor, r) : Bytes{0};
    const Bytes bytes = stack + (packed == traffic.packed.end() ? Bytes{0} : packed->second);
    if (bytes.value > 0) call.copies_before.push_back(RankCopy{r, bytes});
  }
  const bool fused = projection_of(name) == Projection::kGateOrUp;
  const bool cast = engine_loads && quantized_on_loading(spec);
  for (const auto& [rank, bytes] : traffic.received) {
    const Bytes loaded = cast ? cast_bytes(spec, bytes) : bytes;
    call.copies_after.push_back(RankCopy{Rank{rank}, fused ? loaded * 2 : loaded});
    if (cast) call.quantizes.push_back(RankCast{Rank{rank}, bytes, spec.quantization->scheme});
  }
  const auto phases = split_phases(in.plan, transfers);
  if (!phases) return {std::move(call)};
  // The split kernel: the injection ends with a barrier over its communicator (the stage and the
  // first replicas), the ring opens with one over the inference ranks.
  Call ring{.label = name + " (ring)",
            .group = call.group,
            .queue = queue,
            .launch = barrier(inference_ranks(in.problem)),
            .finish = world_barrier,
            .copies_after = std::move(call.copies_after),
            .quantizes = std::move(call.quantizes),
            .transfers = std::move(phases->ring)};
  call.label += " (injection)";
  call.finish = barrier(phases->injection_communicator(stage));
  call.copies_after.clear();
  call.quantizes.clear();
  call.transfers = std::move(phases->injection);
  return {std::move(call), std::move(ring)};
}

}  // namespace refit::sim
