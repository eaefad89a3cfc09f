#pragma once
// refit's NCCL executor timed on one GPU, every plan rank on it (each chunk a send and a receive
// of this process, NCCL's send to self): runs of one transfer that differ only in chunk size and
// staging, so only in their chunks and steps, fitted to t = t0 + chunks c + steps s as
// bench/nccl_plan_bench fits a larger plan. A send or a receive costs c / 2.
#include "refit/core/error.h"
#include "refit/core/units.h"
#include "refit/topology/cluster.h"

namespace refit::nccl_detail {

// On CUDA device `device` (current for the caller), moving `bytes` per run, each run's time the
// median of `repetitions` executions after one untimed. Errors: the executor's or CUDA's, and
// runs that do not tell chunks from steps.
[[nodiscard]] Result<NcclCosts> time_nccl_costs(int device, Bytes bytes, int repetitions);

}  // namespace refit::nccl_detail
