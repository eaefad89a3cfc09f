#pragma once
// What the lowering decides for a whole plan, reduced to what the simulator charges: per
// transfer, the bytes its sender packs and its receiver unpacks, with every rank holding its boxes
// of the problem (shards_of) and running the plan under one zero-copy rule. The same decisions as
// lower_rank() makes, made for every rank at once without storing them.
#include <vector>

#include "refit/core/error.h"
#include "refit/core/problem.h"
#include "refit/lowering/lowered_plan.h"
#include "refit/planner/execution_model.h"

namespace refit::lowering {

struct TransferCopyCost {
  bool packs = false;    // some chunk is packed into staging at the sender
  bool unpacks = false;  // some chunk is unpacked (or partly copied out) at the receiver
  Bytes pack_first;      // packed before the first chunk can leave (0 when it goes in place)
  Bytes unpack_last;     // copied out after the last chunk lands (0 when it lands in place)
};

// One entry per transfer of the plan. Refuses a plan whose senders do not hold what they send.
[[nodiscard]] Result<std::vector<TransferCopyCost>> copy_costs(const LoweredPlan& lowered,
                                                               const ReshardProblem& problem,
                                                               const ZeroCopyRule& rule);

}  // namespace refit::lowering
