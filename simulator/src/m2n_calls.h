#pragma once
// M2N reshard calls (docs/deployed_refit.md, A2 and A3): one `ncclReshard` per parameter on a
// communicator of one training stage's ranks and every inference rank. Per call
// (docs/deployed_refit.md, "One `ncclReshard` call (M2N v0.2, default PACK)"):
//   - host: one kernel launch plus one `cudaMemcpy3DAsync` per peer a rank packs for or unpacks
//     from, then the kernel's opening barrier over the whole communicator;
//   - senders pack what they send through the copy engine (PACK), after NeMo RL's `torch.stack`
//     of their local experts of a grouped expert parameter;
//   - the bytes as the plan moves them; a receiver forwards each slice once all of that slice
//     has landed (store and forward), and the slices of one (sender, receiver) pair land one
//     after another, as puts on one connection do, so the next hop starts on the first slices;
//   - where the plan relays over the network (a ring through destination replicas in other
//     NVLink domains), M2N's split kernel runs in two phases: the injection into the first
//     replicas, a barrier over the injection communicator, then a barrier over the inference
//     ranks opening the ring and NVLink fan-out: two calls here, the second after the first;
//   - receivers unpack what they receive, and copy a gate or up projection once more into the
//     fused vLLM parameter (`gate_up_proj`, `w13_weight`);
//   - the kernel's closing barrier over the communicator.
#include <span>
#include <string_view>
#include <vector>

#include "call_builder.h"
#include "training_export.h"

namespace refit::sim {

// CTAs of an M2N kernel (`DEFAULT_NUM_CTAS`, `reshard_limits.h`): each moves its slice of every
// piece, and a ring hop forwards each slice as it lands.
inline constexpr std::int32_t kM2nCtas = 8;

// NeMo RL's bulk parameters (`is_nccl_reshard_param`): the FFN weights of dense MLPs and routed
// experts; shared experts and everything else go through the packed broadcast.
bool is_bulk_parameter(std::string_view name);

// A routed expert's weight (`...experts.N...`, a stacked `...experts.gate_proj`), not a shared
// expert's.
bool is_routed_expert(std::string_view name);

// Per problem tensor, the plan's transfers carrying it. Refuses a transfer carrying two tensors
// (M2N moves one parameter per call), naming it.
[[nodiscard]] Result<std::vector<std::vector<std::int32_t>>> transfers_by_tensor(const Plan& plan);

// One reshard of `tensor` on `queue`, moving `transfers`, on the communicator of `stage`'s ranks
// and every inference rank: one call, or the injection and the ring of the split kernel, in
// that order (the caller adds them so, the second after the first). With `engine_loads` the
// inference ranks load what lands into an engine, which casts a weight quantized on loading
// before copying it (NeMo RL); a benchmark only moves its bytes.
std::vector<Call> reshard_calls(const DeployInputs& in, std::int32_t tensor,
                                std::span<const std::int32_t> transfers, std::span<const Rank> stage,
                                std::int32_t queue, bool engine_loads);

}  // namespace refit::sim
