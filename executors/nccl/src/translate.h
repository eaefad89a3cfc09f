#pragma once
// Plan -> Program for one process (see program.h and refit/lowering/step_schedule.h). Per step the process
// posts, in this order:
//   copy stream: packs that need nothing received in the previous step; wait for the previous
//                step's traffic; unpack it; quantize steps (FP8 at the landing ranks: everything
//                they quantize landed in earlier steps); packs that forward it; record "packed" (right after
//                the first packs when the step forwards nothing the previous step delivered).
//   comm stream: wait for "packed"; one NCCL group with the step's sends and receives in plan
//                order; record "done".
// Steps alternate between the two halves of each rank's staging, so the packs of step i run
// while step i-1's traffic is in flight, the unpacking of step i-1 while step i's traffic is, and
// by the time step i+1 packs into the half that step i-1 used, the copy stream has waited for
// step i-1 and unpacked it.
#include <span>

#include "chunk_sides.h"
#include "local_view.h"
#include "program.h"
#include "refit/core/error.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/lowering/step_schedule.h"
#include "refit/planner/plan.h"

namespace refit::nccl_detail {

// Each box of `quantize` on the copy stream at the start of the first step that sends a chunk of it,
// before that step's packs, in the order of sender_quantize_order under the step schedule
// (refit/lowering/sender_quantize_order.h, which the simulator charges): so its packs and sends
// see its output, and a box needed later is quantized while earlier steps' traffic flows.
[[nodiscard]] Result<Program> translate(const lowering::LoweredPlan& lowered,
                                        const lowering::StepSchedule& schedule, const ChunkSides& sides,
                                        const LocalView& view, std::span<const QuantizedBox> quantize = {});

// The whole way from a lowered plan (LoweredPlan::make, the gate that checks the plan) to this
// process's program: the global step schedule made, with the NCCL executor's chunks per step
// (ExecutionModel::step_chunks), and this process's part translated.
[[nodiscard]] Result<Program> build_program(const lowering::LoweredPlan& lowered, const LocalView& view,
                                            std::span<const QuantizedBox> quantize = {});

}  // namespace refit::nccl_detail
