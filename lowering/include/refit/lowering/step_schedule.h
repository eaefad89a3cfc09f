#pragma once
// The step schedule of a step-paced executor (refit's NCCL executor), derived from the lowered
// plan alone so that every process, and the simulator, derives the same one. Each chunk of each
// transfer gets a step; in step s every process posts one NCCL group holding exactly its sends and
// receives of step s, so each group's peers post the matching group and NCCL cannot deadlock (by
// induction over steps). A chunk that forwards data lands in a step after every chunk it waits
// for (LoweredPlan::waits); chunks of one transfer keep their order; and per rank and step the
// chunks sent and received fit in half the staging (the other half serves the neighbouring step,
// so packing the next step overlaps this one's traffic) and number at most the executor's
// chunks per step (ExecutionModel::step_chunks). A quantize step (FP8 at the landing ranks) gets
// the step after everything it quantizes, and what forwards from it a later one.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/lowering/lowered_plan.h"

namespace refit::lowering {

inline constexpr std::int32_t kNoUpstream = -1;

struct StepSchedule {
  std::int64_t half = 0;                            // staging bytes per rank and step
  std::vector<std::vector<std::int32_t>> step;      // per transfer, per chunk
  std::vector<std::vector<std::int32_t>> upstream;  // per transfer, per chunk: the latest step that
                                                    // delivered data it forwards, or kNoUpstream
  std::int32_t steps = 0;
};

// Chunks are placed in plan order, each in the first step where it is ready and both its ranks
// have room. Refuses chunks_per_step < 1, and relays whose upstream transfer does not deliver what
// they forward.
[[nodiscard]] Result<StepSchedule> make_step_schedule(const LoweredPlan& lowered,
                                                      std::int32_t chunks_per_step);

}  // namespace refit::lowering
