#pragma once
// Which plan ranks a process of the NCCL executor runs. Usually one per process, and the plan
// rank is the communicator rank; a process may also run several plan ranks on its one GPU (all
// of a plan on one GPU, or training and inference ranks sharing a GPU), then every send and
// receive between them is NCCL's send to self inside the same group.
#include <cstdint>
#include <vector>

#include "refit/core/units.h"
#include "refit/executors/executor.h"

namespace refit {

// comm_rank_of[plan rank] = the communicator rank whose process runs that plan rank. Empty means
// plan rank r runs on communicator rank r.
using CommRankMap = std::vector<std::int32_t>;

}  // namespace refit
