#pragma once
// NeMo RL's collective refit of a list of tensors (docs/deployed_refit.md, A1), as calls:
//   - export (Megatron-Bridge `stream_weights_megatron_to_hf`): per conversion task a pipeline
//     broadcast from the owning stage (`broadcast_from_pp_rank`), then all-gathers over the
//     sharded axes (`gather_from_tp_ranks`, `gather_from_ep_ranks`) and a `torch.cat` on rank 0;
//   - packing (`packed_broadcast_producer`): tensors appended until the buffer exceeds
//     min(fraction x training GPU memory, cap) (`get_target_packed_tensor_size`), then one
//     `torch.cat` into the buffer on rank 0;
//   - one `ncclBroadcast` per buffer from rank 0 over every training and inference rank
//     (`StatelessProcessGroup.broadcast`), serial on that communicator;
//   - per buffer on the inference side (`packed_broadcast_consumer`, vLLM `load_weights`): a
//     host loop of a few eager ops per tensor before the next broadcast is issued, and each
//     rank's copy of its shard of every tensor into its parameter;
//   - two buffers: exporting buffer k waits for broadcast k-2, broadcast k for the unpack of
//     k-2 (the host synchronises each buffer's stream before reusing it).
#include <span>
#include <vector>

#include "call_builder.h"
#include "training_export.h"

namespace refit::sim {

struct PackedBroadcastQueues {
  std::int32_t exporting = 0;  // the training ranks' export chain
  std::int32_t broadcast = 1;  // the communicator of all ranks
  std::int32_t unpack = 2;     // the inference ranks' copies into their parameters
};

// Appends the calls for `tensors` (problem indices, in the order they are sent); the first
// export call waits for the calls in `after`. Without a memory figure for the training GPU the
// buffers take their cap, with a note in the schedule.
void add_packed_broadcast(const DeployInputs& in, const TrainingStages& stages,
                          std::span<const std::int32_t> tensors, const std::vector<std::int32_t>& after,
                          PackedBroadcastQueues queues, CallSchedule& schedule);

}  // namespace refit::sim
