#pragma once
// FP8 in flight: the order in which a sender quantizes the weight boxes it sends from
// (core/quantization.h, QuantSite::kSender), and which of them each chunk waits for. A sender
// quantizes box by box in the order its chunks first read them, and a chunk goes once the boxes
// its bytes come from (and those before them in the order) are quantized, not after every box
// the sender holds: the rest are quantized while the first chunks are on the wire. The executors
// that quantize at the senders run this order (QuantizingExecutor before the UCX executor's
// sends, the NCCL executor's program) and the simulator charges it (simulator/src/quantize_tasks.h).
#include <cstdint>
#include <functional>
#include <vector>

#include "refit/core/units.h"
#include "refit/lowering/step_schedule.h"
#include "refit/planner/plan.h"

namespace refit::lowering {

// Before chunk `chunk` of a transfer goes, the first `boxes` boxes of its sender's order are
// quantized.
struct QuantizeWait {
  std::int64_t chunk = 0;
  std::int32_t boxes = 0;
  bool operator==(const QuantizeWait&) const = default;
};

struct SenderQuantizeOrder {
  // Per rank: the weights it quantizes before sending them (the plan's tensor of their fp8
  // values), in the order it quantizes them.
  std::vector<std::vector<std::uint32_t>> weights;
  // Per transfer: where it waits for more of its sender's boxes, by ascending chunk and boxes;
  // empty for a transfer that reads none of them.
  std::vector<std::vector<QuantizeWait>> waits;

  // How many boxes of the transfer's sender are quantized before its chunk `chunk` goes.
  std::int32_t needs(std::int32_t transfer, std::int64_t chunk) const;
};

// When chunk `chunk` of `transfer`, `first_byte` bytes into its message, goes in the executor's
// order of sends, in any unit that orders them.
using ChunkStart = std::function<double(std::int32_t transfer, std::int64_t chunk, std::int64_t first_byte)>;

// A box comes when the first chunk that reads it starts (ties: by tensor). Chunks are the
// lowering's for `staging` (message_layout.h). Preconditions: validate_structure(plan).
SenderQuantizeOrder sender_quantize_order(const Plan& plan, Bytes staging, const ChunkStart& start);

// Under pair pacing (pair_pacing.h): the bytes the chunk's sender sends the same receiver before
// it, in plan order, over all the bytes of that pair.
ChunkStart paced_start(const Plan& plan);

// Under a step schedule (step_schedule.h): the chunk's step. Reads `schedule`, which must outlive it.
ChunkStart scheduled_start(const StepSchedule& schedule);

}  // namespace refit::lowering
