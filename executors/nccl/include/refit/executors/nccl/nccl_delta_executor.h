#pragma once
// Delta refit over the NCCL executor (delta_executor.h, docs/delta.md): every execute() is one
// step whose pieces' bytes (the senders' baselines and this step's bytes, the receivers' packed
// copies, the payloads) lie in device memory of the communicator's GPU and are encoded and decoded
// there by the GPU codec (raw payloads: dense, bitmask or runs); each round's payloads move with
// ncclSend/ncclRecv as the NCCL executor runs the round's plan (delta_step.h). The rounds,
// agreements, audits, all-or-nothing decoding, repairs and re-balancing are DeltaExecutor's, the
// same as over UCX. Shards are device memory of that GPU, or host memory (each piece packed on the
// host and uploaded, and back); FP8 in flight with deltas takes host memory (the quantizer runs on
// the host).
#include <memory>
#include <optional>

#include "refit/executors/delta_executor.h"
#include "refit/executors/nccl/nccl_executor.h"

namespace refit {

// A new NCCL executor (NcclExecutor::create) behind a DeltaExecutor whose bytes lie on its GPU.
[[nodiscard]] Result<std::unique_ptr<DeltaExecutor>> make_nccl_delta_executor(
    Bootstrap& bootstrap, const ExecutorOptions& options, NcclSetup setup = {},
    std::optional<DeltaRebalance> rebalance = std::nullopt);

}  // namespace refit
