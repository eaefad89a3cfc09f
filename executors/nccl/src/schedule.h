#pragma once
// The global step schedule every process derives from the lowered plan alone. Each chunk of each
// transfer gets a step; in step s every process posts one NCCL group holding exactly its sends
// and receives of step s, so each group's peers post the matching group and NCCL cannot deadlock
// (by induction over steps). A chunk that forwards data lands in a step after every chunk it
// waits for (the lowering's relay waits); chunks of one transfer keep their order; and per rank
// and step the chunks sent and received fit in half the staging (the other half serves the
// neighbouring step, so packing the next step overlaps this one's traffic). A quantise step
// (FP8 at the landing ranks) gets the step after everything it quantises, and what forwards from
// it a later one.
#include <cstdint>
#include <vector>

#include "refit/core/error.h"
#include "refit/lowering/lowered_plan.h"

namespace refit::nccl_detail {

// At most this many chunks per rank and step, so that one NCCL group stays a moderate size.
inline constexpr std::int32_t kMaxChunksPerStep = 256;
inline constexpr std::int64_t kNoUpstream = -1;

struct Schedule {
  std::int64_t half = 0;                            // staging bytes per rank and step
  std::vector<std::vector<std::int32_t>> step;      // per transfer, per chunk
  std::vector<std::vector<std::int32_t>> upstream;  // per transfer, per chunk: the latest step that
                                                    // delivered data it forwards, or kNoUpstream
  std::int32_t steps = 0;
};

// Refuses relays whose upstream transfer does not deliver what they forward.
[[nodiscard]] Result<Schedule> make_schedule(const lowering::LoweredPlan& lowered);

}  // namespace refit::nccl_detail
